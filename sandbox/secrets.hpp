#pragma once
// Secret files in the workspace (.env, .ssh, *.pem, --hide ...) are masked inside the sandbox:
// an empty, unreadable file or directory is mounted over each, so the host copy is untouched.
#include <filesystem>
#include <string>
#include <vector>

namespace belljar {

// Pattern rules: "NAME-GLOB" matches an entry of that name anywhere ("*.pem", ".env.*");
// "a/b" matches entries whose last path components match ("docker/config.json" inside any
// ".docker"); a leading "/" anchors at the workspace root ("/data/private").
bool matches_hide_pattern(const std::string& pattern, const std::filesystem::path& relative);

struct SecretMask {
  std::string relative;  // path inside the workspace
  bool directory = false;
};

// Walks the workspace (never following symlinks) and lists what to mask. A matching symlink
// is followed on the host: when it points inside the workspace, its target is masked (outside,
// it resolves inside the jail's root, where host files do not exist).
std::vector<SecretMask> find_secrets(const std::filesystem::path& workspace,
                                     const std::vector<std::string>& patterns);

}  // namespace belljar
