#pragma once

// SIGTERM/SIGINT end a service cleanly: main blocks them in every thread and
// waits for one, or polls for one from a work loop.
#include <string>

namespace outbox {

// Blocks SIGTERM/SIGINT in the calling thread (call first in main, before
// any thread starts, so every thread inherits the mask) and ignores SIGPIPE.
void BlockShutdownSignals();
// Waits for SIGTERM or SIGINT; returns the signal's name. Returns at once
// when ShutdownRequested() took one already.
std::string WaitForShutdownSignal();
// Whether SIGTERM or SIGINT has arrived, without waiting: for a work loop
// (`while (!ShutdownRequested()) ...`) or a wait that takes a stop
// predicate (Producer::WaitUntilClosed). Once true it stays true, in every
// thread, and WaitForShutdownSignal returns. Needs BlockShutdownSignals
// first: an unblocked SIGTERM ends the process before anyone can see it.
bool ShutdownRequested();

}  // namespace outbox
