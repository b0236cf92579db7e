//! Number formatting rules of nccl-tests v2.19.6 (fit-to-width, `%g`).
