// Draws the stage figures of the Stages pages: each <script type="application/json" data-figure=ID>
// holds a plotly figure (as the app makes it), drawn into the div of that id with plotly.js.
(function () {
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("script[data-figure]").forEach(function (node) {
      var target = document.getElementById(node.getAttribute("data-figure"));
      if (!target || target.getAttribute("data-drawn")) { return; }
      var fig = JSON.parse(node.textContent);
      var layout = Object.assign({}, fig.layout || {}, { autosize: true });
      Plotly.newPlot(target, fig.data || [], layout, { responsive: true, displaylogo: false });
      target.setAttribute("data-drawn", "1");
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
