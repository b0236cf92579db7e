//! The MPI bootstrap (feature `mpi`, rsmpi): what nccl-tests does in its MPI builds:
//! MPI is initialised after option parsing; local rank by host hash; `MPI_Comm_split` by the
//! `NCCL_TESTS_SPLIT*` colour; the unique id broadcast within the split group; barriers,
//! reductions and the gather of device lines over `MPI_COMM_WORLD`.

use super::launch::{self, Env};
use super::{Bootstrap, Group, Reduce, local};
use crate::error::{Error, Failure, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use mpi::{Count, Threading};
use std::sync::{Mutex, MutexGuard};

/// The processes of an MPI job.
pub struct MpiBootstrap {
    /// MPI handles; every call takes this lock (MPI is initialised for serialized threads).
    mpi: Mutex<Handles>,
    rank: usize,
    size: usize,
    local_rank: usize,
    local_size: usize,
    group: Group,
}

struct Handles {
    world: SimpleCommunicator,
    group: Option<SimpleCommunicator>,
    universe: Option<Universe>,
}

// SAFETY: the MPI handles are used only under the mutex, and MPI was initialised with
// MPI_THREAD_SERIALIZED, which allows calls from any thread one at a time.
unsafe impl Send for Handles {}

impl MpiBootstrap {
    /// `MPI_Init_thread`, then host hashes, split and group ranks. Fails when MPI sees one
    /// process but the launcher started several (a mismatched MPI library).
    pub fn init(env: Env) -> Result<MpiBootstrap> {
        let (universe, _provided) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| Error::Internal("MPI was already initialised".into()))?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        if size == 1
            && let Some((var, n)) = launch::launcher_size(env).filter(|(_, n)| *n > 1)
        {
            return Err(Error::Launch(format!(
                "wrong launch: MPI sees 1 process but the launcher started {n} ({var}={n}): this \
                 binary's MPI library does not match the launcher (built against another MPI, or \
                 an OpenMPI without PMI support for this srun), so each process would run alone. \
                 Compare `ldd <binary> | grep mpi` with `mpirun --version`, or run without MPI: \
                 NCCL_PERF_BOOTSTRAP=env"
            )));
        }
        let hash = local::this_host_hash();
        let mut hashes = vec![0u64; size];
        world.all_gather_into(&hash, &mut hashes[..]);
        let color = super::split_color(env, rank)?;
        let c = i32::try_from(color)
            .map_err(|_| Error::Usage(format!("split colour {color} is out of range")))?;
        let group_comm = world
            .split_by_color(Color::with_value(c))
            .ok_or_else(|| Error::Internal("MPI_Comm_split returned no communicator".into()))?;
        let group = Group {
            color,
            rank: group_comm.rank() as usize,
            size: group_comm.size() as usize,
        };
        Ok(MpiBootstrap {
            rank,
            size,
            local_rank: local::local_ranks(&hashes)[rank],
            local_size: local::local_sizes(&hashes)[rank],
            group,
            mpi: Mutex::new(Handles {
                world,
                group: Some(group_comm),
                universe: Some(universe),
            }),
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Handles>> {
        self.mpi
            .lock()
            .map_err(|_| Error::Internal("a thread failed inside MPI".into()))
    }
}

impl Drop for Handles {
    /// A run that failed does not finalize (as nccl-tests): the launcher ends the job.
    fn drop(&mut self) {
        if let Some(u) = self.universe.take() {
            std::mem::forget(self.group.take());
            std::mem::forget(u);
        }
    }
}

impl Bootstrap for MpiBootstrap {
    fn world_size(&self) -> usize {
        self.size
    }
    fn world_rank(&self) -> usize {
        self.rank
    }
    fn local_rank(&self) -> usize {
        self.local_rank
    }
    fn local_size(&self) -> usize {
        self.local_size
    }
    fn group(&self) -> Group {
        self.group
    }
    fn describe(&self) -> String {
        let version = mpi::environment::library_version().unwrap_or_default();
        let name = version
            .split([',', '\n'])
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        format!("MPI ({name})")
    }
    fn barrier(&self) -> Result<()> {
        self.lock()?.world.barrier();
        Ok(())
    }
    fn allreduce(&self, v: f64, op: Reduce) -> Result<f64> {
        let op = match op {
            Reduce::Sum => SystemOperation::sum(),
            Reduce::Min => SystemOperation::min(),
            Reduce::Max => SystemOperation::max(),
        };
        let mut out = 0.0f64;
        self.lock()?.world.all_reduce_into(&v, &mut out, op);
        Ok(out)
    }
    fn broadcast_id(&self, id: &mut [u8; 128]) -> Result<()> {
        let h = self.lock()?;
        let group = h
            .group
            .as_ref()
            .ok_or_else(|| Error::Internal("MPI is finalized".into()))?;
        group.process_at_rank(0).broadcast_into(&mut id[..]);
        Ok(())
    }
    fn gather(&self, text: String) -> Result<Vec<String>> {
        let h = self.lock()?;
        let root = h.world.process_at_rank(0);
        let bytes = text.into_bytes();
        let len = Count::try_from(bytes.len())
            .map_err(|_| Error::Internal("gathered text too long".into()))?;
        if self.rank != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(&bytes[..]);
            return Ok(Vec::new());
        }
        let mut counts = vec![0 as Count; self.size];
        root.gather_into_root(&len, &mut counts[..]);
        let displs: Vec<Count> = counts
            .iter()
            .scan(0, |at, &n| {
                let d = *at;
                *at += n;
                Some(d)
            })
            .collect();
        let total: usize = counts.iter().map(|&n| n as usize).sum();
        let mut buf = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(&bytes[..], &mut part);
        }
        Ok(counts
            .iter()
            .zip(&displs)
            .map(|(&n, &d)| {
                String::from_utf8_lossy(&buf[d as usize..(d + n) as usize]).into_owned()
            })
            .collect())
    }
    fn allgather(&self, text: String) -> Result<Vec<String>> {
        let h = self.lock()?;
        let bytes = text.into_bytes();
        let len = Count::try_from(bytes.len())
            .map_err(|_| Error::Internal("gathered text too long".into()))?;
        let mut counts = vec![0 as Count; self.size];
        h.world.all_gather_into(&len, &mut counts[..]);
        let displs: Vec<Count> = counts
            .iter()
            .scan(0, |at, &n| {
                let d = *at;
                *at += n;
                Some(d)
            })
            .collect();
        let total: usize = counts.iter().map(|&n| n as usize).sum();
        let mut buf = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
            h.world.all_gather_varcount_into(&bytes[..], &mut part);
        }
        Ok(counts
            .iter()
            .zip(&displs)
            .map(|(&n, &d)| {
                String::from_utf8_lossy(&buf[d as usize..(d + n) as usize]).into_owned()
            })
            .collect())
    }
    fn finalize(&self) -> Result<()> {
        let mut h = self.lock()?;
        drop(h.group.take());
        drop(h.universe.take());
        Ok(())
    }
    fn fail(&self, err: &dyn Failure) {
        err.report();
        // Even a mutex poisoned by a failed thread must not keep the job alive.
        let h = self.mpi.lock().unwrap_or_else(|p| p.into_inner());
        h.world.abort(i32::from(err.exit_code()));
    }
}
