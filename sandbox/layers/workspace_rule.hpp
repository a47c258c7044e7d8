#pragma once
// The workspace's one rule, decided by shape before a change happens (the broker,
// sandbox/jail/workspace_broker.hpp, asks it for every name the sandbox would make, change,
// rename or remove): the sandbox may change ordinary files and folders; it may not touch a path
// with a component that begins with "." (every host tool's configuration lives in dot-files and
// dot-folders: git, shells, Python's user site, IPython and Jupyter start-up, kernelspecs,
// autostart, ~/.local/bin), anything inside a Python environment (site-packages, dist-packages;
// a folder holding pyvenv.cfg is the broker's to see), nor what a --protect pattern names.
// --writable PATTERN opens a path and everything beneath it (e.g. .cache/myproject), and the
// plain folders above it may be made.
//
// The rule reads components, never the disk: the broker resolves every symlink itself, so the
// components it passes are where the change really lands, whatever the tree's shape.
#include <optional>
#include <string>
#include <vector>

namespace belljar {

struct WorkspaceRule {
  std::vector<std::string> protect;   // read-only patterns (matches_hide_pattern's grammar)
  std::vector<std::string> writable;  // patterns opened despite the dot and environment rule
};

enum class NameChange { make_folder, other };

// Why the change of `relative` (components below the workspace root; empty: the root itself)
// is refused, or nothing when it is allowed.
std::optional<std::string> refusal(const WorkspaceRule& rule,
                                   const std::vector<std::string>& relative, NameChange change);

// Whether a folder at `relative` may hold nothing the rule closes: false for a dot-path, an
// environment's folder or a protected path. The broker asks it of every entry below a folder
// it is asked to rename, so no protected path is carried away with its parent.
bool closed_name(const WorkspaceRule& rule, const std::vector<std::string>& relative);

}  // namespace belljar
