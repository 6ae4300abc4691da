// The setup page's "what arrived" line: asks the server every few seconds what last reached
// /webhooks/jira, so a test delivery sent from Jira shows up without reloading.
"use strict";
(function () {
  const line = document.getElementById("jira-last");
  if (!line) return;
  async function poll() {
    try {
      const answer = await fetch(line.dataset.poll, { credentials: "same-origin" });
      if (!answer.ok) return;
      const last = await answer.json();
      line.textContent = last.summary;
      line.classList.toggle("ok", last.heard && last.accepted);
      line.classList.toggle("error", last.heard && !last.accepted);
    } catch (_) {
      // The server restarting: the next poll tries again.
    }
  }
  setInterval(poll, 3000);
})();
