module github.com/omnistage/omnistage/test/browser

go 1.26.8

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/omnistage/omnistage v0.0.0
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	golang.org/x/image v0.48.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

// The server's module, for the test images of internal/ocrtest: the
// module under test, never a published version.
replace github.com/omnistage/omnistage => ../..
