// A piece of the C runtime replaced in the jail helper so that its static link leaves out what
// it would drag in: every page of the helper's image that a warden or an init touches stays
// resident for the whole session, in every session on the host. glibc's __assert_fail (which
// libseccomp's asserts call) formats its message through the wide-character printf machinery,
// gettext and the character-set converters: about 60 kB of code for a message that is never
// printed unless libseccomp is broken. This one prints the same facts plainly and aborts, as
// glibc's would.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

void say(const char* text) {
  ssize_t ignored = ::write(2, text, std::strlen(text));
  (void)ignored;
}

}  // namespace

extern "C" [[noreturn]] void __assert_fail(const char* assertion, const char* file,
                                           unsigned int line, const char* function) noexcept {
  say("belljar-jail: assertion failed: ");
  say(assertion);
  say(" (");
  say(file);
  say(", ");
  say(function);
  say(")\n");
  (void)line;
  std::abort();
}
