package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/testing/testserver"
)

// overlaps is a script that returns the pairs of text boxes of the page
// that overlap (by more than a pixel each way), and how many boxes it
// compared: every rectangle of every text node outside scripts and
// styles, as the browser laid it out. Text drawn in a chart's canvas
// (its axes) is uPlot's, which spaces its ticks by the widths of their
// labels in the canvas's own font.
const overlaps = `(() => {
  const boxes = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n; (n = walk.nextNode());) {
    if (!n.textContent.trim() || n.parentElement.closest("script,style")) continue;
    const r = document.createRange();
    r.selectNodeContents(n);
    for (const b of r.getClientRects()) if (b.width > 0 && b.height > 0) boxes.push([b, n.textContent.trim().slice(0, 40)]);
  }
  const pairs = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, c] = [boxes[i][0], boxes[j][0]];
    if (Math.min(a.right, c.right) - Math.max(a.left, c.left) > 1 && Math.min(a.bottom, c.bottom) - Math.max(a.top, c.top) > 1) pairs.push(boxes[i][1] + " | " + boxes[j][1]);
  }
  return {boxes: boxes.length, pairs, wide: document.documentElement.scrollWidth > innerWidth,
    charts: [...document.querySelectorAll("[data-chart]")].filter(c => { const v = c.querySelector("canvas"); return v && v.width > 0 && Math.abs(c.querySelector(".uplot").clientWidth - c.clientWidth) <= 1; }).length};
})()`

type layout struct {
	Boxes  int      `json:"boxes"`
	Pairs  []string `json:"pairs"`
	Wide   bool     `json:"wide"`
	Charts int      `json:"charts"`
}

// TestSimulateReportBrowser loads the HTML report of a generated log in
// headless Chromium, at a desktop's width and a phone's, and checks that
// it renders legibly: no two text boxes overlap, the page does not run
// off its right edge (wide tables scroll in their own box), and each
// rule's chart fills the width it is given. The check itself is checked:
// a label placed over another is caught. With env
// SLUICE_SIMULATE_SCREENSHOT=FILE it saves a screenshot of the report.
func TestSimulateReportBrowser(t *testing.T) {
	testserver.SkipShort(t, "starts Chromium")
	bin := testserver.Binary(t, "chromium", "/usr/lib/chromium")
	log, rules, _ := simulateFiles(t)
	html := filepath.Join(t.TempDir(), "report.html")
	if err := run(context.Background(), []string{"simulate", "-config", rules, "-rule", "web", "-rule", "login=/login", "-html", html, log}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	b, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	for _, width := range []int64{1100, 390} {
		if err := chromedp.Do(b, chromedp.EmulateViewport(width, 900), chromedp.Navigate("file://"+html),
			chromedp.WaitVisible(chromedp.CSS(`body[data-drawn]`))); err != nil {
			t.Fatalf("loading the report: %v", err)
		}
		l, err := chromedp.Run(b, chromedp.Evaluate[layout](overlaps))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d px: %d text boxes, %d charts", width, l.Boxes, l.Charts)
		if l.Boxes < 60 || len(l.Pairs) != 0 || l.Wide || l.Charts != 2 {
			t.Errorf("at %d px: %d text boxes (want 60 or more), overlapping: %q; runs off the right edge: %v; %d of 2 charts fill their width",
				width, l.Boxes, l.Pairs, l.Wide, l.Charts)
		}
		if path := os.Getenv("SLUICE_SIMULATE_SCREENSHOT"); path != "" && width == 1100 {
			png, err := chromedp.Run(b, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A label moved over the summary's first cell is caught.
	bad, err := chromedp.Run(b, chromedp.Evaluate[layout](`(() => {
		const h = document.querySelector("h1"), c = document.querySelector("#summary td").getBoundingClientRect();
		h.style.position = "absolute"; h.style.left = c.left + "px"; h.style.top = (c.top + scrollY) + "px";
		return `+overlaps+`;
	})()`))
	if err != nil || len(bad.Pairs) == 0 || !strings.Contains(strings.Join(bad.Pairs, "\n"), "sluice simulate") {
		t.Errorf("a heading moved over a cell: overlaps %q (%v), want it caught", bad.Pairs, err)
	}
}
