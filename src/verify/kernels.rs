//! CUDA source of the generator and checker kernels, and their names.
