// contextledger inspector: filters apply on change; a conversation page follows new
// requests recorded by the proxy (polls a version token, then swaps in the new page).
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });
  var live = document.getElementById("live");
  if (!live || !window.fetch) { return; }
  var url = live.getAttribute("data-version-url");
  var current = null;
  function poll() {
    fetch(url, { cache: "no-store" }).then(function (r) { return r.ok ? r.json() : null; }).then(function (v) {
      if (!v) { return; }
      if (current !== null && v.version !== current) {
        return fetch(location.href, { cache: "no-store" }).then(function (r) { return r.text(); }).then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("live");
          if (fresh) {
            live.innerHTML = fresh.innerHTML;
            var status = document.getElementById("live-status");
            if (status) { status.textContent = "Updated: " + v.messages + " messages, " + v.assemblies + " model requests."; }
          }
          current = v.version;
        });
      }
      current = v.version;
    }).catch(function () {}).then(function () { setTimeout(poll, 2000); });
  }
  poll();
})();
