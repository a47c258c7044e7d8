#pragma once
// Paths as text, for the jail helper's side: its components, one path relative to another,
// a symlink-free canonical form, a tree removed without following links. std::filesystem
// would do, but it links iostreams and the locale machinery into the static jail helper (about
// a megabyte resident in each warden); these are the few operations the jail needs.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

// The names of `path` in order, without "" and "." ("/a//b/./c/" -> a, b, c); ".." is kept.
std::vector<std::string> path_components(std::string_view path);

// `path` relative to `dir` when it lies strictly below it ("/w/a/b" in "/w" -> "a/b"),
// compared component by component without touching the filesystem; nullopt otherwise.
std::optional<std::string> path_below(std::string_view path, std::string_view dir);

// realpath(3): absolute, every symlink resolved; nullopt when it does not exist.
std::optional<std::string> canonical_path(const std::string& path);

// The path of what descriptor `fd` names, as /proc/self/fd shows it: where a directory opened
// through symlinks really is. nullopt when it can't be read.
std::optional<std::string> descriptor_path(int fd);

// Removes `path` and everything below it, never following a symlink (a link is removed, not
// its target). Best effort: what can't be removed stays. False if anything stayed.
bool remove_tree(const std::string& path);

}  // namespace belljar
