package web

import "embed"

// Assets are the static files under /assets/. htmx is pinned and vendored, never fetched from a CDN:
// web/assets/htmx-2.0.11.min.js is dist/htmx.min.js of the npm package htmx.org@2.0.11
// (npm integrity sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA==,
// sha256 of the file d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717). To update it:
// `npm pack htmx.org@2.x.y`, copy package/dist/htmx.min.js here under its version, change HTMXFile.
//
//go:embed assets
var assets embed.FS

// HTMXFile is the vendored htmx file under /assets/.
const HTMXFile = "htmx-2.0.11.min.js"
