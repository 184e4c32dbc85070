//! One folder per backend.
