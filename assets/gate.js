// Runs before the first paint (a plain, blocking script: tiny on purpose). The page is served with
// the default view pre-rendered (its query string in the meta tag); a link that asks for anything else
// (another tab, a card, an overlay) must never show those numbers, not even for a frame: mark the
// document so CSS hides the pre-render but its view-independent hero (qe-deep) — or, for the default view, so CSS keeps the page
// invisible beside it until it takes over (qe-pre).
(function () {
  var meta = document.querySelector('meta[name="qe-default-view"]');
  if (!meta || !meta.content) return; // no pre-render in this build
  var q = location.search;
  var plain = q === '' || q === '?' || q === '?tab=tested' || q === meta.content;
  document.documentElement.classList.add(plain && !location.hash ? 'qe-pre' : 'qe-deep');
})();
