// fdbqueue dashboard: every form with data-confirm asks before it is sent (a served file, so
// the content security policy can forbid inline scripts).
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    event.preventDefault();
  }
}, true);
