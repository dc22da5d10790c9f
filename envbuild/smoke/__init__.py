"""Programs that run inside built images, with only the standard library and the framework."""
