// Ctrl-C (SIGINT) and SIGTERM during a command: the handler only records the signal; the command stops at its next
// step (Progress::step, called before each tensor) by throwing Interrupted, so that what it was writing goes away as
// on any error (an unnamed output file vanishes, a checkpoint's staging directory is removed), and exits with
// 128 + the signal's number. The handler then reverts to the default: a second Ctrl-C ends the process at once (the
// output file still vanishes; a staging directory is removed by the next run writing the same OUT).
#pragma once

#include <signal.h>

#include <csignal>
#include <stdexcept>
#include <string>

namespace shrink::cli {

inline volatile std::sig_atomic_t interrupt_signal = 0;

class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal)
      : std::runtime_error(std::string("interrupted by ") + (signal == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM") +
                           ": stopped before the next tensor; nothing of the output is left"),
        signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

extern "C" inline void record_interrupt(int signal) { interrupt_signal = signal; }

inline void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = record_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_RESETHAND;  // system calls go on; a second signal takes the default action
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

inline void throw_if_interrupted() {
  if (interrupt_signal != 0) throw Interrupted(interrupt_signal);
}

}  // namespace shrink::cli
