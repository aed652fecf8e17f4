// LVMS console: theme switch (system, dark, light), kept in localStorage. No inline scripts, so the
// Content-Security-Policy can forbid them.
(function () {
  "use strict";
  var key = "lvms-console-theme";
  var order = ["system", "dark", "light"];
  function apply(theme) {
    if (theme === "dark" || theme === "light") {
      document.documentElement.setAttribute("data-theme", theme);
    } else {
      document.documentElement.removeAttribute("data-theme");
    }
    var b = document.getElementById("theme-toggle");
    if (b) { b.textContent = "Theme: " + theme; }
  }
  var current = "system";
  try { current = localStorage.getItem(key) || "system"; } catch (e) { /* storage disabled */ }
  apply(current);
  document.addEventListener("DOMContentLoaded", function () {
    apply(current);
    var b = document.getElementById("theme-toggle");
    if (!b) { return; }
    b.addEventListener("click", function () {
      current = order[(order.indexOf(current) + 1) % order.length];
      try { localStorage.setItem(key, current); } catch (e) { /* storage disabled */ }
      apply(current);
    });
  });
})();
