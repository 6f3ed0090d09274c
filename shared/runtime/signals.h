#pragma once

// SIGTERM/SIGINT end a service cleanly: main blocks them in every thread and
// waits for one.
#include <string>

namespace outbox {

// Blocks SIGTERM/SIGINT in the calling thread (call first in main, before
// any thread starts, so every thread inherits the mask) and ignores SIGPIPE.
void BlockShutdownSignals();
// Waits for SIGTERM or SIGINT; returns the signal's name.
std::string WaitForShutdownSignal();

}  // namespace outbox
