// What the exec tests share: the interpreter that runs the Python candidates (candidates/), their command lines,
// and the check that no child process is left behind.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef PACKORACLE_EXEC_TEST_DIR
#error "PACKORACLE_EXEC_TEST_DIR must name exec/test/candidates"
#endif

namespace packoracle::exec_test {

namespace fs = std::filesystem;

// The interpreter: $PACKORACLE_TEST_PYTHON, else the system python3 (a version-manager shim in PATH costs
// a few hundred milliseconds per restart), else python3 from PATH.
inline std::string Python() {
  if (const char* env = std::getenv("PACKORACLE_TEST_PYTHON"); env && *env) return env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

inline bool HavePython() {
  static const bool have = std::system((Python() + " -c pass >/dev/null 2>&1").c_str()) == 0;
  return have;
}

inline std::string Script(const std::string& name, const std::string& args = "") {
  return Python() + " " + std::string(PACKORACLE_EXEC_TEST_DIR) + "/" + name + (args.empty() ? "" : " " + args);
}

struct ProcInfo {
  pid_t pid;
  char state;
  pid_t ppid;
  pid_t pgrp;
};

inline std::vector<ProcInfo> Processes() {
  std::vector<ProcInfo> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    ProcInfo p{static_cast<pid_t>(std::stol(name)), '?', 0, 0};
    rest >> p.state >> p.ppid >> p.pgrp;
    out.push_back(p);
  }
  return out;
}

// No child of this process (running or zombie), and no live process left in any of `groups` (a killed
// grandchild may stay a zombie for a moment until init reaps it: that is not ours).
inline void ExpectNoLeftovers(const std::deque<pid_t>& groups) {
  int status = 0;
  errno = 0;
  const pid_t r = waitpid(-1, &status, WNOHANG);
  EXPECT_EQ(r, -1) << (r == 0 ? "a child process is still running" : "an unreaped child (zombie) was found: pid " + std::to_string(r));
  EXPECT_EQ(errno, ECHILD);
  const std::set<pid_t> group_set(groups.begin(), groups.end());
  std::vector<ProcInfo> left;
  for (int attempt = 0; attempt < 100; ++attempt) {
    left.clear();
    for (const auto& p : Processes()) {
      if (p.ppid == getpid() || (group_set.count(p.pgrp) && p.state != 'Z')) left.push_back(p);
    }
    if (left.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& p : left) ADD_FAILURE() << "leftover process " << p.pid << " (state " << p.state << ", parent " << p.ppid << ", group " << p.pgrp << ")";
}

}  // namespace packoracle::exec_test
