package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// pages holds one template set per page, each the layout plus that page's
// "main".
type pages struct{ byName map[string]*template.Template }

var funcs = template.FuncMap{
	"abs":      absTime,
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"rel":      relTime,
	"dur":      short,
	"left":     timeLeft,
	"path":     url.PathEscape,
	"json":     jsonHTML,
	"pct":      pct,
	"frac":     frac,
	"statuses": cairnqtype.Statuses,
	"deref":    func(s *string) string { return deref(s) },
	"terminal": func(s interface{ IsTerminal() bool }) bool { return s.IsTerminal() },
	"itoa":     strconv.Itoa,
	"details":  detailsJSON,
	"rows": func(base string, now time.Time, sel bool, ts []*cairnqtype.Task) rowsView {
		return rowsView{Base: base, Now: now, Select: sel, Tasks: ts}
	},
	"at":        func(t, now time.Time) atView { return atView{T: t, Now: now} },
	"ms":        func(ms int64) time.Time { return time.UnixMilli(ms) },
	"took":      func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond },
	"pauseText": pauseText,
	"join":      strings.Join,
	"attempts":  func(t *cairnqtype.Task) []engine.AttemptError { return engine.AttemptErrors(t.Metadata) },
	"graph": func(base, dir string, g graphLayout) graphView {
		return graphView{Base: base, Dir: dir, G: g}
	},
	"workerRows": func(now time.Time, ws []workerRow) workersView {
		return workersView{Now: now, Workers: ws}
	},
}

// graphView is what the "graph" template takes: a workflow's graph laid
// out across or down.
type graphView struct {
	Base, Dir string
	G         graphLayout
}

// workersView is what the "workerrows" template takes.
type workersView struct {
	Now     time.Time
	Workers []workerRow
}

// rowsView is what the "taskrows" template takes.
type rowsView struct {
	Base   string
	Now    time.Time
	Select bool
	Tasks  []*cairnqtype.Task
}

// atView is what the "when" template takes: a time and the clock to say
// how far it is.
type atView struct{ T, Now time.Time }

// newPages parses the templates; {{static "console.js"}} in them is the
// path of a static file under its hashed name.
func newPages(static *staticFiles) *pages {
	fm := template.FuncMap{"static": static.url}
	maps.Copy(fm, funcs)
	layout := template.Must(template.New("layout.html").Funcs(fm).ParseFS(assets, "assets/templates/layout.html"))
	p := &pages{byName: map[string]*template.Template{}}
	names, _ := fs.Glob(assets, "assets/templates/page_*.html")
	for _, n := range names {
		t := template.Must(template.Must(layout.Clone()).ParseFS(assets, n))
		name := strings.TrimSuffix(strings.TrimPrefix(n, "assets/templates/page_"), ".html")
		p.byName[name] = t
	}
	return p
}

// view is what every page template receives.
type view struct {
	Title string
	Page  string
	// Nav is the navigation item the page is under: Page, but
	// "workflows" for a workflow's page and the list of workflows (the
	// task list filtered by the workflows' record name).
	Nav    string
	Base   string
	Writes bool
	Hide   bool
	Now    time.Time
	Data   any
}

// render writes page name, or only its "main" block when the page's script
// asks for it to refresh in place (header X-Cairnq-Fragment).
func (k *console) render(w http.ResponseWriter, r *http.Request, name string, now time.Time, data any) {
	v := k.view(r, name, now, data)
	tmpl := k.pages.byName[name]
	root := "layout"
	if r.Header.Get("X-Cairnq-Fragment") == "1" {
		root = "main"
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, root, v); err != nil {
		k.opts.Logger.ErrorContext(r.Context(), "cairnq console: rendering", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "X-Cairnq-Fragment")
	w.Write(buf.Bytes())
}

func (k *console) pageFail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := statusOf(err)
	if status >= 500 {
		k.opts.Logger.ErrorContext(r.Context(), "cairnq console", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	tmpl := k.pages.byName["error"]
	tmpl.ExecuteTemplate(w, "layout", k.view(r, "error", time.Now(), msg))
}

// view is what page name receives: the console's settings, and data.
func (k *console) view(r *http.Request, name string, now time.Time, data any) view {
	nav := name
	if tv, ok := data.(tasksView); name == "workflow" || ok && tv.Query.Name == cairnq.WorkflowName {
		nav = "workflows"
	}
	return view{Title: k.opts.Title, Page: name, Nav: nav, Base: k.base(r), Writes: k.opts.AllowWrites,
		Hide: k.opts.HidePayloads, Now: now, Data: data}
}

func (k *console) overviewPage(w http.ResponseWriter, r *http.Request) {
	o, err := k.overview(r.Context())
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	k.render(w, r, "overview", o.Now, struct {
		*overview
		Chart chart
		Flash string
	}{o, newChart(o.Settled), r.URL.Query().Get("done")})
}

type tasksView struct {
	*taskPage
	Query   engine.ConsoleQuery
	Filters []filterValue
	// NewerURL, OlderURL and NewestURL are the pagination links; empty
	// when there is no such page.
	NewerURL, OlderURL, NewestURL string
	Return                        string // the query string to come back to after a bulk action
	Flash                         string
	// MatchText says how many tasks match the filters: "12 tasks match",
	// "At least 5000 tasks match" (the count stopped at the scan bound).
	MatchText string
	ScanLimit int // Options.ScanLimit: where a count stops
	// ByFilter is the list's filter when it is one a bulk action by
	// filter takes (status, queue and name, no other); nil otherwise.
	ByFilter *cairnq.TaskFilter
}

type filterValue struct{ Param, Label, Value string }

func (k *console) tasksPage(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := k.listQuery(v)
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	p, err := k.listTasks(r.Context(), q)
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	now, err := k.st.ConsoleNow(r.Context())
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	tv := tasksView{taskPage: p, Query: q, Return: v.Encode(), Flash: v.Get("done")}
	for _, f := range filterFields {
		label := f.Label
		if f.Param == "search" && k.opts.HidePayloads {
			label = "Error has" // the search reads no hidden payload
		}
		tv.Filters = append(tv.Filters, filterValue{f.Param, label, v.Get(f.Param)})
	}
	tv.MatchText, tv.ScanLimit = matchText(p.Matches, p.MatchesExact, q), k.opts.ScanLimit
	if f, ok := bulkFilter(q); ok {
		tv.ByFilter = &f
	}
	base := k.base(r) + "/tasks?"
	link := func(set, to string) string {
		c := url.Values{}
		for key, vals := range v {
			if key != "before" && key != "after" && key != "done" {
				c[key] = vals
			}
		}
		if set != "" {
			c.Set(set, to)
		}
		return base + c.Encode()
	}
	if p.Prev != "" {
		tv.NewerURL = link("after", p.Prev)
	}
	if p.Next != "" {
		tv.OlderURL = link("before", p.Next)
	}
	if q.Before != "" || q.After != "" {
		tv.NewestURL = link("", "")
	}
	k.render(w, r, "tasks", now, tv)
}

func (k *console) taskPage(w http.ResponseWriter, r *http.Request) {
	d, err := k.taskDetail(r.Context(), r.PathValue("id"), r.URL.Query().Get("key") == "1")
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	k.render(w, r, "task", d.Now, struct {
		*taskDetail
		Flash string
	}{d, r.URL.Query().Get("done")})
}

func (k *console) workersPage(w http.ResponseWriter, r *http.Request) {
	now, err := k.st.ConsoleNow(r.Context())
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	ws, err := k.workers(r.Context())
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	k.render(w, r, "workers", now, ws)
}

// taskActionForm is a page's cancel, retry or copy button: the action, then
// back to the task's page (the new task's, for a copy).
func (k *console) taskActionForm(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	t, err := k.act(r.Context(), id, action)
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	if action == "delete" { // no task page to go back to
		http.Redirect(w, r, k.base(r)+"/tasks?"+url.Values{"done": {"Deleted " + id + "."}}.Encode(), http.StatusSeeOther)
		return
	}
	done := map[string]string{"cancel": "Cancel requested.", "retry": "Queued again.", "copy": "Submitted as a copy of " + id + "."}[action]
	http.Redirect(w, r, k.base(r)+"/tasks/"+url.PathEscape(t.ID)+"?"+url.Values{"done": {done}}.Encode(), http.StatusSeeOther)
}

// bulkForm is the task list's bulk action over the checked rows, then back
// to the same list.
func (k *console) bulkForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		k.pageFail(w, r, badRequest("malformed form"))
		return
	}
	action := r.PostForm.Get("action")
	var done string
	if r.PostForm.Get("scope") == "filter" {
		f := cairnq.TaskFilter{Status: cairnq.Status(r.PostForm.Get("status")), Queue: r.PostForm.Get("queue"), Name: r.PostForm.Get("name")}
		n, err := k.bulkByFilter(r.Context(), action, f)
		if err != nil {
			k.pageFail(w, r, err)
			return
		}
		done = fmt.Sprintf("%s: %d changed, every matching task.", action, n)
	} else {
		changed, unchanged, err := k.bulk(r.Context(), action, r.PostForm["id"])
		if err != nil {
			k.pageFail(w, r, err)
			return
		}
		done = fmt.Sprintf("%s: %d changed, %d unchanged.", action, len(changed), len(unchanged))
	}
	back, _ := url.ParseQuery(r.PostForm.Get("return")) // re-encoded: only a query string comes back
	back.Del("done")
	back.Set("done", done)
	http.Redirect(w, r, k.base(r)+"/tasks?"+back.Encode(), http.StatusSeeOther)
}

// matchText says how many tasks match q's filters, n exactly or at least
// n: "1 task matches", "At least 5000 tasks match", and without a filter
// "37 tasks".
func matchText(n int64, exact bool, q engine.ConsoleQuery) string {
	q.Before, q.After, q.Limit = "", "", 0
	filtered := q != engine.ConsoleQuery{}
	s := strconv.FormatInt(n, 10) + " task"
	if n != 1 {
		s += "s"
	}
	if filtered {
		if n == 1 {
			s += " matches"
		} else {
			s += " match"
		}
	}
	if !exact && n == 0 {
		// "At least 0" is true and says nothing.
		return "No task matches among those read"
	}
	if !exact {
		s = "At least " + s
	}
	return s
}

// Template helpers.

func absTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// relTime says how far t is from now: "3m 12s ago", "in 40s".
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d >= 0 {
		return short(d) + " ago"
	}
	return "in " + short(-d)
}

// timeLeft is how long until t, or how long since it passed.
func timeLeft(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := t.Sub(now)
	if d < 0 {
		return "expired " + short(-d) + " ago"
	}
	return short(d) + " left"
}

func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

func pct(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(math.Round(frac(p)*1000)/10, 'f', -1, 64) + "%"
}

func frac(p *float64) float64 {
	if p == nil || math.IsNaN(*p) {
		return 0
	}
	return min(max(*p, 0), 1)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func detailsJSON(e *cairnqtype.ErrorEnvelope) template.HTML {
	if e == nil || len(e.Details) == 0 {
		return ""
	}
	b, err := jsonMarshal(e.Details)
	if err != nil {
		return ""
	}
	return jsonHTML(b)
}
