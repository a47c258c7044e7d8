#include "kernel/output/active_output.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <vector>

#include "kernel/output/html_sanitizer.hpp"
#include "kernel/output/widget_models.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

// Rendered as text, an image or a collapsible JSON tree by Notebook 6 and JupyterLab 4: nothing
// in the data becomes markup or code. Declared once; every other type is checked or active.
// %audit's records have a type of their own that no frontend renders (it shows the table).
const std::set<std::string, std::less<>> kInertMimeTypes = {
    "text/plain",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/bmp",
    "application/json",
    "application/vnd.belljar.audit+json",
    "application/vnd.belljar.checkpoint+json",
    "application/vnd.jupyter.stdout",
    "application/vnd.jupyter.stderr"};

constexpr std::string_view kWidgetView = "application/vnd.jupyter.widget-view+json";

// What an isolated frame may make the browser load: the complete list. The frame holds only
// markup html_sanitizer re-serialized (no <link>, <meta>, <base>, <script>: Chromium opens a
// <link rel=preconnect>'s connection whatever the policy says), runs no script
// (its sandbox lacks allow-scripts, and so also forms, popups, top navigation, meta refresh and
// plugins); its Content-Security-Policy starts from default-src 'none', so every fetch directive
// not listed here (scripts, frames, objects, connections, workers, prefetch, manifests) loads
// nothing. With no host allowed the session's data has nowhere to go but this page: what the
// frame draws comes from the output itself. docs/security.md ("Active output in the browser")
// has the same table with its reasons; the browser test egress.test.mjs tries the complement.
struct FrameLoad {
  const char* directive;
  const char* sources;
};
constexpr FrameLoad kFrameLoads[] = {
    {"default-src", "'none'"},         // everything not below
    {"style-src", "'unsafe-inline'"},  // the output's own <style> and style=
    {"img-src", "data:"},              // images drawn from the output's bytes
    {"font-src", "data:"},             // fonts embedded in the output
    {"media-src", "data:"},            // audio and video embedded in the output
    {"form-action", "'none'"},         // not a fetch directive: default-src doesn't cover it
    {"base-uri", "'none'"},            // nor this: <base> can't move relative URLs
};

std::string frame_policy() {
  std::string policy;
  for (const FrameLoad& load : kFrameLoads)
    policy += (policy.empty() ? "" : "; ") + std::string(load.directive) + " " + load.sources;
  return policy;
}

std::optional<std::string> text_of(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return std::nullopt;
  std::string joined;
  for (auto& line : value) {
    if (!line.is_string()) return std::nullopt;
    joined += line.get_ref<const std::string&>();
  }
  return joined;
}

std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A mime type as a notice may name it: the worker chose it, and notices are shown in the page.
std::string shown_mime(const std::string& mime) {
  bool plain = mime.size() <= 80 && std::all_of(mime.begin(), mime.end(), [](unsigned char c) {
                 return std::isalnum(c) || c == '/' || c == '.' || c == '+' || c == '-' || c == '_';
               });
  return plain ? mime : "a type with an unusual name";
}

std::string notice_paragraph(const std::string& text) {
  return "<p style=\"font-size:smaller;color:#a33\">[belljar] " + escape_html(text) + "</p>";
}

// The bundle's inert HTML, or none, followed by a notice.
void with_notice(json& out, const std::string& notice) {
  std::string html = out.contains("text/html") ? out["text/html"].get<std::string>() : "";
  out["text/html"] = html + notice_paragraph(notice);
}

bool is_rich(const std::string& mime) {
  return mime != "text/plain";
}

}  // namespace

void apply_active_output_within(json& holders, ActiveOutput mode) {
  if (mode == ActiveOutput::allow || !(holders.is_object() || holders.is_array())) return;
  for (auto& holder : holders) {
    if (!holder.is_object()) continue;
    auto data = holder.find("data");
    if (data != holder.end()) *data = apply_active_output(*data, mode);
  }
}

json language_info_from_worker(const json& hello_info) {
  std::string version = "3";
  if (auto it = hello_info.find("version");
      hello_info.is_object() && it != hello_info.end() && it->is_string()) {
    const std::string& asked = it->get_ref<const std::string&>();
    bool well_formed = !asked.empty() && asked.size() <= 32 &&
                       std::isdigit(static_cast<unsigned char>(asked[0])) &&
                       std::all_of(asked.begin(), asked.end(), [](unsigned char c) {
                         return std::isalnum(c) || c == '.' || c == '+' || c == '-';
                       });
    if (well_formed) version = asked;
  }
  return {{"name", "python"},
          {"version", version},
          {"mimetype", "text/x-python"},
          {"file_extension", ".py"},
          {"pygments_lexer", "ipython3"},
          {"codemirror_mode", {{"name", "ipython"}, {"version", 3}}},
          {"nbconvert_exporter", "python"}};
}

namespace {

// A fence's info string as Notebook 6 and JupyterLab hand it to a syntax highlighter that
// loads a mode by that name (Notebook 6: requirejs, where "x.js?y" is a URL relative to the
// page, so a workspace file would run as script): [A-Za-z0-9_+-]{0,32}, nothing else.
bool is_fence_language(std::string_view info) {
  while (!info.empty() && (info.front() == ' ' || info.front() == '\t')) info.remove_prefix(1);
  while (!info.empty() && (info.back() == ' ' || info.back() == '\t' || info.back() == '\r'))
    info.remove_suffix(1);
  return info.size() <= 32 && std::all_of(info.begin(), info.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '+' || c == '-';
         });
}

// Every run of three or more backticks or tildes, wherever it stands on its line (in a quote,
// a list item, after text), is read as a fence opener: what follows it on the line must be a
// fence language. Reading too much as a fence only refuses more.
bool fences_are_plain(std::string_view markdown) {
  for (size_t at = 0; at < markdown.size();) {
    char mark = markdown[at];
    if (mark != '`' && mark != '~') {
      ++at;
      continue;
    }
    size_t run = at;
    while (run < markdown.size() && markdown[run] == mark) ++run;
    if (run - at >= 3) {
      size_t line_end = markdown.find('\n', run);
      if (line_end == std::string_view::npos) line_end = markdown.size();
      if (!is_fence_language(markdown.substr(run, line_end - run))) return false;
      at = line_end;
    } else {
      at = run;
    }
  }
  return true;
}

// Every link and image destination ("](" inline, "]:" a definition), read as a renderer
// would: after spaces and line breaks, up to white space or ')', escapes and entities
// resolved. Over-reading (a "](" that isn't a link) only refuses more.
std::vector<std::string> link_destinations(const std::string& markdown) {
  std::vector<std::string> found;
  for (size_t at = 0; (at = markdown.find(']', at)) != std::string::npos; ++at) {
    if (at + 1 >= markdown.size() || (markdown[at + 1] != '(' && markdown[at + 1] != ':')) continue;
    size_t p = at + 2;
    while (p < markdown.size() && (markdown[p] == ' ' || markdown[p] == '\t' ||
                                   markdown[p] == '\n' || markdown[p] == '\r'))
      ++p;
    size_t end = p;
    while (end < markdown.size() && markdown[end] != ' ' && markdown[end] != '\t' &&
           markdown[end] != '\n' && markdown[end] != '\r' && markdown[end] != ')')
      ++end;
    std::string destination;
    std::string raw = decode_character_references(markdown.substr(p, end - p));
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\' && i + 1 < raw.size() &&
          std::ispunct(static_cast<unsigned char>(raw[i + 1])))
        continue;
      destination += raw[i];
    }
    if (destination.empty() && markdown[at + 1] == ':') continue;  // "[x]:" in prose
    found.push_back(std::move(destination));
  }
  return found;
}

}  // namespace

bool markdown_is_inert(const std::string& markdown) {
  if (markdown.find('<') != std::string::npos || markdown.find('\0') != std::string::npos)
    return false;
  bool unknown_named = false;
  std::string decoded = decode_character_references(markdown, &unknown_named);
  // An entity we don't decode could be a backslash or '<' to the browser that shows it.
  if (unknown_named || decoded.find('<') != std::string::npos || !tex_is_inert(decoded))
    return false;
  if (!fences_are_plain(markdown) || !fences_are_plain(decoded)) return false;
  // An image is fetched as the page renders it, with the server's cookies: a GET that acts
  // (/terminals/new opens a shell). With any image in the text, every destination is held to
  // the resource rule (an image's may come from a definition shared with links); without, a
  // link must still be clicked, and http(s), mailto and fragments may be.
  bool has_image =
      markdown.find("![") != std::string::npos || decoded.find("![") != std::string::npos;
  for (const std::string& destination : link_destinations(markdown))
    if (!(has_image ? resource_url_is_inert(destination) : link_url_is_inert(destination)))
      return false;
  return true;
}

std::string isolated_frame(const std::string& document, const std::string& why) {
  // about:blank as the base: relative URLs in the frame resolve to nothing, not to the
  // notebook server, and document.baseURI doesn't carry the page's URL (with its ?token=).
  std::string srcdoc =
      std::string("<!DOCTYPE html><html><head><meta charset=\"utf-8\">") +
      "<base href=\"about:blank\"><meta http-equiv=\"Content-Security-Policy\" content=\"" +
      frame_policy() + "\"></head><body>" + document + "</body></html>";
  // sandbox="" grants nothing: no script, form, popup, navigation of the top, automatic
  // features (meta refresh), plugins or same origin.
  return "<div class=\"belljar-isolated\"><iframe sandbox=\"\" "
         "referrerpolicy=\"no-referrer\" "
         "title=\"isolated output\" style=\"width:100%;height:420px;border:1px solid "
         "#ccc;resize:vertical\" srcdoc=\"" +
         escape_html(srcdoc) +
         "\"></iframe><div style=\"font-size:smaller;color:#777\">[belljar] " + escape_html(why) +
         "</div></div>";
}

json apply_active_output(const json& data, ActiveOutput mode, const WidgetModels* widgets) {
  if (mode == ActiveOutput::allow) return data;
  if (!data.is_object())
    return {{"text/plain", "[belljar] a display that is not a mime bundle was dropped"}};
  json out = json::object();
  std::vector<std::string> findings;  // what was active, for the caption or the notice
  std::vector<std::string> dropped;   // mime types not forwarded
  std::optional<std::string> active_html, active_svg, script, markdown_source;
  std::string html_of_bundle;  // the bundle's own HTML, checked and re-serialized, for the frame
  for (auto& [mime, value] : data.items()) {
    if (kInertMimeTypes.count(mime)) {
      out[mime] = value;
      continue;
    }
    std::optional<std::string> text = text_of(value);
    if (mime == "text/html" || mime == "image/svg+xml") {
      if (!text) {
        dropped.push_back(shown_mime(mime));
        continue;
      }
      // HTML goes into the page as it is: its styles are kept to a box of its own. An SVG
      // document is drawn as an <img> by JupyterLab and Notebook 7, but Notebook 6 puts it into
      // the page: its <style> rules apply inside its own root only.
      bool is_html = mime == "text/html";
      std::string scope = is_html ? style_scope() : "";
      MarkupVerdict verdict =
          check_markup(*text, is_html ? MarkupKind::html : MarkupKind::svg, scope);
      // An SVG document without a <style> is sent as it is (its bytes, as ipykernel's); one with
      // is read again, its rules scoped to its root.
      if (!is_html && verdict.has_style) {
        scope = style_scope();
        verdict = check_markup(*text, MarkupKind::svg, scope);
      }
      if (is_html && verdict.styled) verdict.canonical = contained_markup(verdict.canonical, scope);
      if (is_html) html_of_bundle = verdict.canonical;
      if (verdict.inert) {
        out[mime] = verdict.canonical;
        continue;
      }
      findings.insert(findings.end(), verdict.findings.begin(), verdict.findings.end());
      // Only what was checked goes into the frame: a tokenizer of ours and the browser's may
      // disagree about raw markup (a <link rel=preconnect> the frame's policy doesn't cover).
      (mime == "text/html" ? active_html : active_svg) = verdict.canonical;
      if (mode == ActiveOutput::strip) out[mime] = verdict.canonical;
    } else if (mime == "text/markdown") {
      if (text && markdown_is_inert(*text)) {
        out[mime] = *text;
      } else {
        dropped.push_back(shown_mime(mime));
        if (text) markdown_source = *text;
      }
    } else if (mime == "text/latex") {
      if (text && tex_is_inert(*text))
        out[mime] = *text;
      else
        dropped.push_back(shown_mime(mime));
    } else if (mime == "application/javascript" || mime == "text/javascript") {
      if (text) script = *text;
      findings.push_back(mime);
    } else if (mime == kWidgetView && widgets && widgets->view_is_checked(value)) {
      out[mime] = {{"model_id", value["model_id"]}};  // the page draws it from checked state
      for (const char* version : {"version_major", "version_minor"})
        if (value.contains(version) && value[version].is_number_integer())
          out[mime][version] = value[version];
    } else {
      dropped.push_back(shown_mime(mime));
    }
  }
  std::string mode_flag = "--active-output " + active_output_name(mode);
  bool active = active_html || active_svg || script;
  std::string why = "this output holds active content (" + listed(findings) + ")";
  if ((active_html || active_svg) && mode == ActiveOutput::isolate) {
    // The frame shows the markup's inert remainder, under kFrameLoads: its own layout and
    // styles, none of its active parts.
    std::string document = active_html               ? *active_html
                           : !html_of_bundle.empty() ? html_of_bundle
                                                     : active_svg.value_or("");
    out["text/html"] = isolated_frame(
        document, why + ": it is shown in an isolated frame without its active parts, loading " +
                      "nothing from outside the output (" + mode_flag + ")");
    out.erase("image/svg+xml");
  } else if (script && mode == ActiveOutput::isolate) {
    // A script alone: isolated output runs no script, so the inert rest is shown as it is.
    with_notice(out, why + ": its script was not run (" + mode_flag + ")");
  } else if (active && mode == ActiveOutput::strip) {
    with_notice(out, "active content removed from this output: " + listed(findings) + " (" +
                         mode_flag + ")");
  }
  if (!out.contains("text/plain") || !out["text/plain"].is_string()) {
    // Clients that show text (MCP, `belljar run`, a console) learn what the display was.
    std::string fallback = markdown_source.value_or("");
    if (fallback.empty() && active)
      fallback = "[belljar] active output (" + listed(findings) + "): " +
                 (mode == ActiveOutput::isolate && (active_html || active_svg)
                      ? "shown in an isolated frame without its active parts"
                  : mode == ActiveOutput::isolate ? "not run"
                                                  : "removed") +
                 " (" + mode_flag + ")";
    out["text/plain"] = fallback;
  }
  bool shows_text_only = true;
  for (auto& [mime, value] : out.items())
    if (is_rich(mime)) shows_text_only = false;
  if (!dropped.empty() && shows_text_only) {
    std::string text = out["text/plain"].get<std::string>();
    if (!text.empty() && text.back() != '\n') text += '\n';
    out["text/plain"] =
        text + "[belljar] not rendered (active output, " + mode_flag + "): " + listed(dropped);
  }
  return out;
}

}  // namespace belljar
