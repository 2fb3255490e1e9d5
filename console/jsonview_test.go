package console

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONHTMLFoldsAndKeepsOrder(t *testing.T) {
	long := strings.Repeat("x", 5000)
	big := make([]int, 3000)
	// Keys in stored order, not sorted.
	raw := json.RawMessage(`{"z":1,"a":"<b>","long":"` + long + `","nested":{"big":` + string(mustJSON(big)) + `}}`)
	h := string(jsonHTML(raw))
	if strings.Index(h, "&#34;z&#34;") > strings.Index(h, "&#34;a&#34;") {
		t.Fatal("keys reordered")
	}
	if strings.Contains(h, "<b>") || !strings.Contains(h, "&lt;b&gt;") {
		t.Fatal("markup from the value not escaped")
	}
	if !strings.Contains(h, `<details class="j-long">`) || !strings.Contains(h, "5000 characters") {
		t.Fatal("long string not folded")
	}
	if !strings.Contains(h, `<details class="j-box"><summary>[`) || !strings.Contains(h, "3000 items") {
		t.Fatalf("large array not folded")
	}
	if got := string(jsonHTML(json.RawMessage(`not json <x>`))); strings.Contains(got, "<x>") {
		t.Fatal("invalid JSON not escaped")
	}
	if got := string(jsonHTML(nil)); !strings.Contains(got, "null") {
		t.Fatal(got)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
