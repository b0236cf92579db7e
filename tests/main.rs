//! The integration tests: one test program (ripgrep's layout), one module per subject, the
//! helpers they share compiled once. Run a subject alone with a filter on its module name:
//! `cargo test --test integration -- tool::` (or `cli_hostile::`, `ship_install::`...).
//!
//! `interrupt.rs` is a program of its own: it raises a stop signal in its own process, which
//! would reach every test running beside it here.

// Helpers shared by several subjects.
mod locate_runs;
mod programs;
mod reference_outputs;
mod shipped;

// The benchmark programs as a user starts them (stand-in CUDA/NCCL/NVRTC libraries, no GPU).
mod bootstrap;
mod cli;
mod cli_hostile;
mod collectives;
mod dry_run_text;
// The default build under mpirun (PMIx) and mpiexec.hydra (PMI-1), and through the MPI
// library those launchers came with.
mod engines;
mod env_faults;
mod json_secrets;
mod one_cause;
// Launcher variables a stale environment can carry.
mod launcher_env;
// The launcher-library search against libraries planted by another user.
mod library_search;
mod mpilib;
// Every output file: never through a link, never into a pipe, never in place.
mod output_files;
// Needs the test hooks (cargo feature `test-hooks`) that release builds leave out.
#[cfg(feature = "test-hooks")]
mod rank_faults;
mod rendezvous_hostile;
mod self_contained;

// The benchmark's pieces in process: the table of benchmarks, the collectives against the host
// oracle, the GPU kernels (on a GPU only) and their bundled PTX.
mod benchmarks;
mod collective_replay;
mod gpu_generator;
mod ptx;

// Output formats against nccl-tests' reference outputs and the C library.
mod format_vs_libc;
mod golden_format;
mod golden_json;

// The NCCL plugin (--explain's capture) and the explain verdicts.
mod capture_abi;
mod capture_chain;
mod capture_old_nccl;
mod explain_cli;
mod explain_report;
mod explain_tuning;

// locate (straggler search) on model clusters and replayed runs.
mod locate_evidence;
mod locate_faults;
mod locate_json_plot;
mod locate_output;
mod locate_replay;
mod locate_sim;
mod locate_verdicts;

// The companion tool on our logs and real public ones.
mod health_baseline;
mod health_check;
mod public_logs;
mod tool;

// What ships: install layout, Dockerfile, Kubernetes examples, manuals, samples, scripts, and
// the public recipes with one line changed.
mod recipes;
mod ship_dockerfile;
mod ship_install;
mod ship_kubernetes;
mod ship_manuals;
mod ship_newcomer;
mod ship_samples;
mod ship_scripts;
