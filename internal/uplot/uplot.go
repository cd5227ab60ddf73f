// Package uplot embeds the one chart library sluice draws with, for the
// dashboard and for the report of sluice simulate: uPlot, at the version
// server/admin/web/package-lock.json pins, copied here by
// scripts/vendor-dashboard.sh (its licence in uplot.LICENSE). Nothing is
// fetched from the network at view time.
package uplot

import _ "embed"

// JS is the library's script (uPlot.iife.min.js), which defines uPlot.
//
//go:embed uplot.min.js
var JS string

// CSS is its style sheet.
//
//go:embed uplot.min.css
var CSS string

// Version is the version embedded, with a trailing newline.
//
//go:embed uplot.version
var Version string
