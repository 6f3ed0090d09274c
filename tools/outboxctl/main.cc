// outboxctl: the operator's command-line client of the outbox services
// (recovery's ops API, payments, vouchers, health). `outboxctl --help`.
#include <iostream>
#include <string>
#include <vector>

#include "tools/outboxctl/run.h"

int main(int argc, char** argv) {
  outbox::ctl::GrpcConnections connections;
  return outbox::ctl::RunCommandLine(std::vector<std::string>(argv + 1, argv + argc), connections,
                                     std::cout, std::cerr);
}
