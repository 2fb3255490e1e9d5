package console

import (
	"bytes"
	"encoding/json"
	"html/template"
	"strconv"
	"strings"
)

// How JSON is folded on a task's page: a string longer than foldString
// characters, and an object or array whose encoded form is longer than
// foldBytes, render closed (<details>), showing their size.
const (
	foldString = 200
	foldBytes  = 2048
	maxRender  = 1 << 20 // past this, a value is shown as its size only
)

// jsonHTML renders encoded JSON as indented HTML, keys in their stored
// order, with large values folded. Every piece of text from the value goes
// through template.HTMLEscapeString; the markup around it is constant.
func jsonHTML(raw json.RawMessage) template.HTML {
	if raw == nil {
		return template.HTML(`<span class="j-null">null</span>`)
	}
	if len(raw) > maxRender {
		return template.HTML(`<span class="j-fold">` + template.HTMLEscapeString(sizeOf(len(raw))) + ` of JSON, too large to show; read it through the API</span>`)
	}
	var b strings.Builder
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := renderValue(&b, dec, raw, 0); err != nil {
		return template.HTML(`<span class="j-str">` + template.HTMLEscapeString(string(raw)) + `</span>`)
	}
	return template.HTML(b.String())
}

// renderValue renders the next value of dec. src is the whole input, so a
// container's encoded size is known from the decoder's offsets.
func renderValue(b *strings.Builder, dec *json.Decoder, src []byte, depth int) error {
	start := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		closeDelim := "}"
		if v == '[' {
			closeDelim = "]"
		}
		// Render the children first, to know the count and size.
		var inner strings.Builder
		n := 0
		for dec.More() {
			inner.WriteString(`<div class="j-row">`)
			if v == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				inner.WriteString(`<span class="j-key">` + template.HTMLEscapeString(strconv.Quote(key)) + `</span>: `)
			}
			if err := renderValue(&inner, dec, src, depth+1); err != nil {
				return err
			}
			inner.WriteString(`</div>`)
			n++
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		if n == 0 {
			b.WriteString(template.HTMLEscapeString(string(v) + closeDelim))
			return nil
		}
		size := int(dec.InputOffset() - start)
		what := plural(n, "key")
		if v == '[' {
			what = plural(n, "item")
		}
		open := " open"
		if size > foldBytes && depth > 0 || size > 8*foldBytes {
			open = ""
		}
		b.WriteString(`<details class="j-box"` + open + `><summary>` + template.HTMLEscapeString(string(v)) +
			` <span class="j-fold">` + template.HTMLEscapeString(what+", "+sizeOf(size)) + `</span></summary>` +
			`<div class="j-in">` + inner.String() + `</div></details>` + template.HTMLEscapeString(closeDelim))
	case string:
		q := strconv.Quote(v)
		if len([]rune(v)) > foldString {
			r := []rune(v)
			head := strconv.Quote(string(r[:foldString/2]))
			b.WriteString(`<details class="j-long"><summary><span class="j-str">` + template.HTMLEscapeString(head[:len(head)-1]) +
				`…</span> <span class="j-fold">` + template.HTMLEscapeString(strconv.Itoa(len(r))+" characters") +
				`</span></summary><span class="j-str">` + template.HTMLEscapeString(q) + `</span></details>`)
			return nil
		}
		b.WriteString(`<span class="j-str">` + template.HTMLEscapeString(q) + `</span>`)
	case json.Number:
		b.WriteString(`<span class="j-num">` + template.HTMLEscapeString(v.String()) + `</span>`)
	case bool:
		b.WriteString(`<span class="j-bool">` + strconv.FormatBool(v) + `</span>`)
	case nil:
		b.WriteString(`<span class="j-null">null</span>`)
	}
	return nil
}

func sizeOf(n int) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// plural is "1 key", "2 keys".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
