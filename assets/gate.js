// Runs before the first paint (a plain, blocking script: tiny on purpose). The page is served with
// the default view pre-rendered; a link that asks for anything else (another tab, a card, an overlay)
// must never show those numbers, not even for a frame: mark the document so CSS hides the
// pre-render and shows the loading line until the page has started.
(function () {
  var meta = document.querySelector('meta[name="qe-default-view"]');
  var q = location.search;
  var plain = q === '' || q === '?' || q === '?tab=tested' || (meta && q === meta.content);
  if (!plain || location.hash) document.documentElement.classList.add('qe-deep');
})();
