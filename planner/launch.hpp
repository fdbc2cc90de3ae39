// What `validate` and `calibrate` share to run themselves under MPI: starting
// `mpirun` over this binary in its own process group (stopped with us), and
// writing an output file atomically.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace paraplan {

// Writes the whole text to `path` through a temporary file and a rename, so a
// failed run never leaves a partial file; throws SpecError naming --output.
void write_output(const std::string& path, const std::string& text);

// This executable's path (for mpirun to start it as every rank).
std::string self_exe();

// A process's state letter from /proc/PID/stat (R, S, T, t, Z, ...); '\0' when
// there is no such process (or it cannot be read).
char process_state(int pid);

// Starts `mpirun -np RANKS --bind-to none [--oversubscribe] EXTRA... self_exe() RANK_ARGS...`
// with stdout and stderr into `log`, in a process group of its own that
// SIGTERM/SIGINT/SIGHUP to us also stop. Oversubscribes when ranks exceed
// cores; sets Open MPI's allow-run-as-root variables when root, and
// shared-memory settings that suit the CPU backend (no cross-memory attach,
// 64 KiB eager sends: there is no progress thread).
pid_t start_mpirun(int ranks, const std::string& extra_mpirun_args, std::vector<std::string> rank_args,
                   const std::string& log);
// Stops the group (SIGTERM, then SIGKILL after 0.5 s) and reaps it.
void stop_mpirun(pid_t pid, int* wstatus);
// The group has ended: our signals no longer need forwarding.
void mpirun_ended();

// Removes `dir` when SIGINT, SIGTERM or SIGHUP ends paraplan during a run ("" = nothing).
void remove_on_signal(const std::string& dir);

}  // namespace paraplan
