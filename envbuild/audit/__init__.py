"""`envbuild audit`: the GPU kernels compiled into libraries, wheels and images, read without a GPU."""
