//! Host mirror of the verifiable data generator.
