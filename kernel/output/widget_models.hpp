#pragma once
// The --active-output policy for comms: what the page may receive of the worker's comm traffic,
// above all the state of ipywidgets' models, which the page's widget manager turns into markup.
//
// Threat: the notebook page acts on comm messages with the server's authority. Notebook 6's
// comm manager hands a comm_open's `target_module` to requirejs, and the widget manager does the
// same with a model's `_model_module` / `_view_module`: a name like "/files/x.js" runs a
// workspace file as script in the page. Widget views put state into the page as markup
// (`description` and HTML/HTMLMath `value` through innerHTML), typeset it with MathJax (Label,
// HTMLMath, descriptions: \href and \require act), and set layout and style traits as CSS (a
// url() is a request from the learner's browser to anywhere: a way out of a sandbox with no
// network). An ipywidgets 7/8 Output model carries whole outputs, and an Image with format
// "url" makes the browser fetch its value.
//
// So under isolate and strip (allow passes everything): target_module is always null and a
// target name is a plain name; a widget's module must be ipywidgets' own, its class names ones
// ipywidgets registers and its versions of the exact form ipywidgets writes (else the message
// is withheld: another library's code would run in the page, and a name the page can't find
// goes into its "could not create model" markup as it was sent); markup is re-serialized by
// html_sanitizer with its active parts removed; typeset text with active TeX and CSS that is
// not inert are replaced or dropped; an Output's outputs pass apply_active_output. The guard
// also remembers which comms the page has as widgets, so that a widget view
// (application/vnd.jupyter.widget-view+json) of a model it checked may be shown, and so that
// comm_info_reply never tells the page (which rebuilds its widgets from it after a reload) of a
// widget it never checked.
//
// Every message is admitted by one table, kCommShapes (docs/security.md, "Comms"): each of
// ipywidgets' targets with the messages and methods ipywidgets 6, 7 and 8 send on it, and the
// check each gets; any other message to those targets is withheld. A reloaded ipywidgets 8 page
// rebuilds every model from the control comm's `update_states` (round three: the raw state of
// an HTML value ran script there), so each model in it is checked as its own updates are. A
// target ipywidgets does not use (a library's or a cell's own) is not dropped: no code of the
// page acts on it unless an extension registered it, and all of its data is checked as an
// unnamed model's state, the strictest reading (markup cleaned, other strings inert CSS).
// What the page does with state past these checks is closed too: a "__proto__" key (the page's
// key-by-key copy would inherit what it holds, unchecked), a buffer path into a prototype, and a
// jslink that would copy a text value into markup, TeX or CSS are withheld.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sandbox/policy/policy.hpp"

namespace belljar {

// The comm targets the page may hear from, as the table names them.
enum class TargetKind {
  widget,   // jupyter.widget: a model (ipywidgets 6, 7, 8)
  control,  // jupyter.widget.control: a reloaded page asks for every model (ipywidgets 8)
  version,  // jupyter.widget.version: the page checks ipywidgets' version (ipywidgets 6)
  other,    // any other plain name: not ipywidgets'
};
TargetKind target_kind(std::string_view target);
std::string_view target_kind_name(TargetKind kind);

// What a row's message gets before the page sees it.
enum class ShapeCheck {
  widget_state,   // the data (6) and data.state / data.content (7, 8) as the model's state; buffers
                  // only where buffer_paths (7, 8) or buffers (6) place them, never on a name
  update_states,  // each model's entry as that model's own state; only models the page was told of
  version,        // {"version": ipywidgets' form} and nothing else
  nothing,        // a close: its data and buffers are dropped (the page reads none)
  whole_data,     // every key of the data as an unnamed model's trait
};

// One admitted message: a worker's `type` (comm_open, comm_msg, comm_close) on a target, with
// comm_msg's data.method ("" for none, "*" for any).
struct CommShape {
  TargetKind target;
  std::string_view type;
  std::string_view method;
  ShapeCheck check;
};

// Everything the worker may send the page under isolate and strip; the rest is withheld.
// ipywidgets never opens its control or version comm from the kernel (the page does), and the
// page never gets request_state or request_states from it.
inline constexpr CommShape kCommShapes[] = {
    {TargetKind::widget, "comm_open", "", ShapeCheck::widget_state},
    {TargetKind::widget, "comm_msg", "update", ShapeCheck::widget_state},
    {TargetKind::widget, "comm_msg", "echo_update", ShapeCheck::widget_state},  // 8
    {TargetKind::widget, "comm_msg", "custom", ShapeCheck::widget_state},
    {TargetKind::widget, "comm_msg", "display", ShapeCheck::widget_state},  // 6
    {TargetKind::widget, "comm_close", "", ShapeCheck::nothing},
    {TargetKind::control, "comm_msg", "update_states", ShapeCheck::update_states},
    {TargetKind::control, "comm_close", "", ShapeCheck::nothing},
    {TargetKind::version, "comm_msg", "", ShapeCheck::version},
    {TargetKind::version, "comm_close", "", ShapeCheck::nothing},
    {TargetKind::other, "comm_open", "", ShapeCheck::whole_data},
    {TargetKind::other, "comm_msg", "*", ShapeCheck::whole_data},
    {TargetKind::other, "comm_close", "", ShapeCheck::whole_data},
};
// The row admitting this message, or null.
const CommShape* find_comm_shape(TargetKind target, std::string_view type, std::string_view method);

class WidgetModels {
 public:
  static constexpr size_t kMaxComms = 10'000;  // remembered at once; a comm past it is withheld

  explicit WidgetModels(ActiveOutput mode) : mode_(mode) {}

  // A worker's comm_open / comm_msg / comm_close content, made fit for the page in place, and
  // its decoded buffers (some may be left out). Returns why it must not reach the page at all,
  // or "" when it may.
  std::string admit(const std::string& type, nlohmann::json& content,
                    std::vector<std::string>& buffers);
  std::string admit(const std::string& type, nlohmann::json& content);  // no buffers
  // A frontend's comm_open (its target is the frontend's own word) and comm_close.
  void opened_by_frontend(const std::string& comm_id, const std::string& target);
  void closed(const std::string& comm_id) { comms_.erase(comm_id); }
  void forget_all() { comms_.clear(); }  // a new worker has no comms

  // The target the page knows this comm by, or "" for a comm it was never told of.
  std::string target_of(const std::string& comm_id) const;
  // True for a widget-view bundle value naming a model whose state was checked here.
  bool view_is_checked(const nlohmann::json& view) const;

  // Values changed or dropped since the last call (for the request's notice).
  size_t take_cleaned() { return std::exchange(cleaned_, 0); }

 private:
  struct Comm {
    std::string target;
    TargetKind kind = TargetKind::other;
    bool value_is_markup = true;  // until a model name says otherwise, and never again after
    bool value_is_typeset = true;
    bool named = false;  // a model name has been seen
  };
  std::string check_shape(const std::string& type, Comm& comm, nlohmann::json& data,
                          std::vector<std::string>& buffers);
  // `envelope`: the message's own keys around a state (method, state, content, buffer paths)
  // are not traits; without it every key is one.
  std::string check_state(nlohmann::json& state, Comm& comm, bool envelope);
  void check_outputs(nlohmann::json& outputs);
  static bool is_model_reference(const nlohmann::json& value);
  bool links_text(const nlohmann::json& end) const;
  std::string check_update_states(nlohmann::json& data, std::vector<std::string>& buffers);
  std::string check_version(nlohmann::json& data);

  ActiveOutput mode_;
  std::unordered_map<std::string, Comm> comms_;
  size_t cleaned_ = 0;
};

}  // namespace belljar
