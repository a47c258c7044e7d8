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
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>

#include "sandbox/policy/policy.hpp"

namespace belljar {

class WidgetModels {
 public:
  static constexpr size_t kMaxComms = 10'000;  // remembered at once; a comm past it is withheld

  explicit WidgetModels(ActiveOutput mode) : mode_(mode) {}

  // A worker's comm_open / comm_msg / comm_close content, made fit for the page in place.
  // Returns why it must not reach the page at all, or "" when it may.
  std::string admit(const std::string& type, nlohmann::json& content);
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
    bool widget = false;
    bool value_is_markup = true;  // until a model name says otherwise, and never again after
    bool value_is_typeset = true;
    bool named = false;  // a model name has been seen
  };
  std::string check_state(nlohmann::json& state, Comm& comm);

  ActiveOutput mode_;
  std::unordered_map<std::string, Comm> comms_;
  size_t cleaned_ = 0;
};

}  // namespace belljar
