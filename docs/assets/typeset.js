// Typesets the maths of a page with the vendored KaTeX (docs/assets/katex/VENDORED.txt).
// pymdownx.arithmatex (generic mode) wraps each formula of the Markdown, $…$ or $$…$$, in an
// element of class "arithmatex" holding \(…\) or \[…\]; only those elements are rendered, so a
// dollar sign in prose or a shell prompt in a code block is never taken for maths. A formula
// KaTeX cannot parse is shown in red (throwOnError: false), and the site's browser test fails
// on it (tests/test_docsite.py).
function typesetMaths(root) {
  for (const element of root.querySelectorAll(".arithmatex")) {
    if (element.dataset.typeset) continue;
    const source = element.textContent.trim();
    const display = source.startsWith("\\[");
    const tex = source.replace(/^\\[\[(]/, "").replace(/\\[\])]$/, "");
    katex.render(tex, element, { displayMode: display, throwOnError: false });
    element.dataset.typeset = "katex";
  }
}

// Material for MkDocs loads pages in place (document$) when instant navigation is on; without
// it, the page is typeset once when loaded.
if (typeof document$ !== "undefined") {
  document$.subscribe(({ body }) => typesetMaths(body));
} else {
  document.addEventListener("DOMContentLoaded", () => typesetMaths(document.body));
}
