// flightlog dashboard: the conversation page's seq slider (conversation.html).
//
// The range input and the number input show the same seq; releasing the slider loads the transcript
// at that seq (the form's GET). Nothing from the server is read here: the page is rendered server-side.
"use strict";

(function () {
  function start() {
    const form = document.getElementById("conv-form");
    const range = document.getElementById("conv-at-range");
    const number = document.getElementById("conv-at");
    if (!form || !range || !number) return;
    range.addEventListener("input", () => {
      number.value = range.value;
    });
    range.addEventListener("change", () => {
      number.value = range.value;
      form.submit();
    });
    number.addEventListener("input", () => {
      range.value = number.value;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
