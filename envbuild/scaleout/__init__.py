"""Beyond one machine: a `docker buildx bake` file and a GitHub Actions workflow for a spec."""
