#include "trainer/stop_signal.h"

#include <signal.h>

#include <csignal>

namespace dt {

namespace {

volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous_term, g_previous_int, g_previous_usr1;

// Async-signal-safe: records the first signal; a second one takes the default action (ends the process).
extern "C" void on_stop_signal(int sig) {
  if (g_received != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_received = sig;
}

}  // namespace

StopSignal::StopSignal() {
  g_received = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking calls (file writes, MPI) carry on
  ::sigaction(SIGTERM, &sa, &g_previous_term);
  ::sigaction(SIGINT, &sa, &g_previous_int);
  ::sigaction(SIGUSR1, &sa, &g_previous_usr1);
}

StopSignal::~StopSignal() {
  ::sigaction(SIGTERM, &g_previous_term, nullptr);
  ::sigaction(SIGINT, &g_previous_int, nullptr);
  ::sigaction(SIGUSR1, &g_previous_usr1, nullptr);
}

int StopSignal::received() const { return g_received; }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace dt
