// Package browsertest drives cairnq's web console (package console) in a
// real headless Chromium through chromedp: live counts and progress over
// server-sent events, the banner when they are lost, the task page, cancel
// from the page, the read-only console and forged posts, values from the
// database rendered inert, the list's match count, the layout at a phone's
// width (390px) and a desktop's (1400px), and screenshots for the
// documentation.
//
// It is a module of its own so that chromedp never enters the graph of the
// root module. Its tests skip when no Chromium binary is found, unless
// CAIRNQ_REQUIRE_BROWSER=1 makes that a failure; CAIRNQ_BROWSER names the
// binary when it is not on PATH. CAIRNQ_SCREENSHOTS_DIR, when set, is where
// the screenshots are written (docs/screenshots in this repository):
//
//	cd console/browsertest
//	CAIRNQ_SCREENSHOTS_DIR=$PWD/../../docs/screenshots GOWORK=off go test -run TestConsole/sqlite/Screenshots .
//
// The package holds only tests.
package browsertest
