// Applies the saved colour theme before the page paints (a classic script:
// it runs before the stylesheet's colours are seen).
(function () {
  try {
    var t = localStorage.getItem('stormradius.theme');
    if (t === 'dark' || t === 'light') document.documentElement.setAttribute('data-theme', t);
  } catch (e) { /* storage disabled: follow the system */ }
})();
