//! Plots of a locate record (placeholder while the logic is tested).
