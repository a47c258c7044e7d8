#pragma once
// The --active-output policy applied to every mime bundle from the worker before a client sees
// it: display_data, update_display_data, execute_result, pager payloads, user_expressions and
// inspect_reply data.
//
// Threat: notebook frontends render output inside their own page. A script, an event handler,
// a javascript: link, raw HTML in markdown or a MathJax \href there runs with the notebook
// server's authority: its REST API and terminals, a shell on the host outside the sandbox. The
// worker is the attacker, so the supervisor decides what a bundle may carry:
//   * inert mime types pass as they are (kInertMimeTypes): text, LaTeX without link or
//     extension macros, PNG/JPEG/GIF/WebP/BMP, JSON, stdout/stderr text;
//   * text/html and image/svg+xml pass re-serialized when html_sanitizer finds them inert;
//   * text/markdown passes without raw HTML and with only http(s)/mailto/#/data:image links;
//   * a widget view passes when it names a model whose state widget_models.hpp checked;
//   * everything else is active: application/javascript, HTML or SVG that isn't inert, and
//     every other type (other widget views, plotly/vega/bokeh/holoviews JSON their renderers
//     execute).
// isolate: active markup's inert remainder (re-serialized by html_sanitizer: nothing the
// browser could read differently) is shown in <iframe sandbox=""> (an opaque origin: no cookies, no
// same-origin requests, no access to the page; no script, form, popup, navigation of the top or
// meta refresh) under a Content-Security-Policy that loads nothing but what the output carries
// inline (kFrameLoads in the .cpp, one table): with no host allowed, the session's data must not
// leave through the learner's browser either — a frame that may run script or navigate can carry
// a workspace file to any address. Scripts are not run; other active types are dropped with a
// notice. strip: the active parts are removed, the inert remainder kept, and a notice says what
// went. allow: unchanged (the banner says so). A text/plain entry is always kept.
#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/policy/policy.hpp"

namespace belljar {

class WidgetModels;

// The bundle as the client may receive it. `data` is a mime bundle (an object); anything else
// becomes a text/plain explanation. `widgets`: the session's checked models, for widget views.
nlohmann::json apply_active_output(const nlohmann::json& data, ActiveOutput mode,
                                   const WidgetModels* widgets = nullptr);

// The same, for each {"data": bundle} inside user_expressions (an object) or a payload list.
void apply_active_output_within(nlohmann::json& holders, ActiveOutput mode);

// language_info for kernel_info_reply. Notebook 6 loads codemirror_mode as a script path
// (requirejs), so a worker-chosen mode like "../../files/x" would run a workspace file in the
// page: every field is the supervisor's, only a well-formed Python version is the worker's.
nlohmann::json language_info_from_worker(const nlohmann::json& hello_info);

// Markdown that renders to nothing active: no raw HTML, no link or image to an unsafe scheme,
// no MathJax link or extension macro.
bool markdown_is_inert(const std::string& markdown);

// The iframe that runs `document` (an HTML document's markup) isolated, with its caption.
std::string isolated_frame(const std::string& document, const std::string& why);

}  // namespace belljar
