#include "parallel/mpi_runtime.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"

#ifdef DELTATRON_HAVE_MPI
#include <mpi.h>
#endif

namespace dt {

namespace {

const char* launcher_env(const char** which) {
  // Set by the launcher in every rank it starts; a plain `deltatron train` has none of them.
  static const char* const kVars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
  for (const char* v : kVars) {
    if (const char* s = std::getenv(v)) {
      if (which) *which = v;
      return s;
    }
  }
  return nullptr;
}

struct LocalPeer {
  int world_rank;
  pid_t pid;
};

// The other ranks on this host (MpiRuntime fills it; empty without MPI).
std::vector<LocalPeer>& local_peers() {
  static std::vector<LocalPeer> peers;
  return peers;
}

// Whether process `pid` is gone: no such process, or a zombie (dead, not yet reaped by its launcher).
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');  // the state follows the command name in parentheses
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

#ifdef DELTATRON_HAVE_MPI
bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
#endif

}  // namespace

bool launched_with_mpi() { return launcher_env(nullptr) != nullptr; }

MpiRuntime::MpiRuntime() {
  const char* var = nullptr;
  const char* value = launcher_env(&var);
  if (!value) return;
#ifdef DELTATRON_HAVE_MPI
  if (mpi_running()) {
    // MPI was started by someone else (a test harness): use it, leave ending it to them.
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  } else {
    int provided = 0;
    DT_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS,
             "MPI_Init_thread failed (launched by mpirun: {}={})", var, value);
    active_ = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  // The process ids of the ranks on this host, so that a rank waiting in a collective can see one
  // of them vanish (vanished_local_rank).
  const int mine[2] = {world_rank_, static_cast<int>(getpid())};
  std::vector<int> all(2 * static_cast<size_t>(local_size_));
  MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, node);
  local_peers().clear();
  for (int i = 0; i < local_size_; ++i)
    if (all[2 * i] != world_rank_) local_peers().push_back({all[2 * i], static_cast<pid_t>(all[2 * i + 1])});
  MPI_Comm_free(&node);
#else
  // One rank under mpirun needs no MPI; several would each think they are alone and train the same
  // model side by side, so stop them (PMIX_RANK gives no size: every rank but 0 stops).
  DT_CHECK(std::string(var) == "PMIX_RANK" ? std::atoi(value) == 0 : std::atoi(value) <= 1,
           "launched by mpirun ({}={}) but this build has no MPI: install libopenmpi-dev and openmpi-bin "
           "(scripts/install_deps.sh) and rebuild, or run a single process without mpirun", var, value);
#endif
}

MpiRuntime::~MpiRuntime() {
#ifdef DELTATRON_HAVE_MPI
  // MPI_Finalize is collective: with an exception unwinding, the other ranks may never get here, so
  // leave it; the process then exits non-zero without finalizing and mpirun ends the job.
  if (active_ && mpi_running() && std::uncaught_exceptions() == 0) MPI_Finalize();
#endif
}

int world_rank() {
#ifdef DELTATRON_HAVE_MPI
  if (mpi_running()) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
#endif
  return 0;
}

bool several_ranks() {
#ifdef DELTATRON_HAVE_MPI
  if (mpi_running()) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n > 1;
  }
#endif
  return false;
}

std::string vanished_local_rank() {
  for (const LocalPeer& p : local_peers())
    if (process_gone(p.pid))
      return "rank " + std::to_string(p.world_rank) + " (pid " + std::to_string(p.pid) +
             " on this host) vanished: it was killed by a signal or crashed without a message";
  return {};
}

void abort_job(std::string_view what) {
  // One write, so that the line of one rank is not interleaved with another's.
  std::string line = "deltatron: error: [rank " + std::to_string(world_rank()) + "] " + std::string(what) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::fflush(stdout);
#ifdef DELTATRON_HAVE_MPI
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, 1);  // kills every rank of the job
#endif
  std::_Exit(1);
}

void run_or_abort_job(const std::function<void()>& body) {
  if (!several_ranks()) {
    body();
    return;
  }
  try {
    body();
  } catch (const std::exception& e) {
    abort_job(e.what());
  } catch (...) {
    abort_job("unknown exception");
  }
}

}  // namespace dt
