package uitest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts Debian's chromium headless with the flags this machine
// needs, opens one tab of width x height, and collects the console errors.
func browser(t *testing.T, width, height int) (*page, func() []string) {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(width, height))
	tab, cancelTab := chromedp.NewContext(alloc)
	tab, cancelTimeout := context.WithTimeout(tab, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })

	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(tab)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s (%s %s)", m, m.Source, m.URL))
				mu.Unlock()
			}
		}
	}()
	consoleErrors := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("browser console errors: %q", consoleErrors())
		}
	})
	return &page{t: t, ctx: tab}, consoleErrors
}

// open navigates the tab and waits for the page's first rendered poll.
func (p *page) open(url string) {
	p.t.Helper()
	resp, err := chromedp.RunResponse(p.ctx, chromedp.Navigate(url))
	if err != nil {
		p.t.Fatalf("open %s: %v", url, err)
	}
	if resp == nil || resp.Status != 200 {
		p.t.Fatalf("open %s: %+v, want a page load with HTTP 200", url, resp)
	}
	p.waitFor(20*time.Second, "page rendered", `!!window.sluiceStats && window.sluiceStats.polls > 0`)
}

// afterPolls waits until the page has rendered n more polls.
func (p *page) afterPolls(n int64) {
	p.t.Helper()
	start := p.polls()
	p.waitFor(30*time.Second, fmt.Sprintf("%d more polls", n), fmt.Sprintf(`window.sluiceStats.polls >= %d`, start+n))
}

// has reports whether a CSS selector matches.
func (p *page) has(sel string) bool {
	p.t.Helper()
	return eval[bool](p, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
}

// count is how many elements a CSS selector matches.
func (p *page) count(sel string) int {
	p.t.Helper()
	return eval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// lowContrast lists the visible text whose colour has less than 4.5:1
// contrast with the background behind it (WCAG 2 AA, normal text).
const lowContrast = `(() => {
  const parse = (s) => { const m = (s.match(/[\d.]+/g) || []).map(Number); return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 }; };
  const lum = ({ r, g, b }) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c.a > 0) return c; } return { r: 255, g: 255, b: 255, a: 1 }; };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.sr-only, [hidden], script, style, svg')) continue;
    if (!el.getClientRects().length) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const fg = lum(parse(getComputedStyle(el).color));
    const bg = lum(bgOf(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < 4.5) out.push(el.tagName + '.' + el.className + ' "' + el.textContent.trim().slice(0, 40) + '" ' + ratio.toFixed(2) + ':1');
  }
  return out;
})()`
