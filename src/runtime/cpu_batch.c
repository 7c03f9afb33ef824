/* cpu_batch.c - the text of a batch: several kernel sources as one C
 * translation unit (why and the cache layout: cpu.h, cpu_cc.c).
 *
 * cut_source lexes a source once (comments, string and character literals,
 * preprocessor lines, braces) and cuts it into prelude items and the
 * kernel. An item ends at the end of a line where no brace, no #if group
 * and no declaration is open; the kernel starts with the item where
 * fn_name first appears and runs to the end. While it lexes it checks what
 * would not mean the same once the source shares a translation unit with
 * others: a declaration that is not a typedef, a function or a prototype (an
 * object: two kernels' copies would become one), a static inside a
 * prelude function (its state would be shared), #define, #undef, #pragma
 * and _Pragma (they would reach the later kernels), and any preprocessor
 * line but #include and #if groups. Such a source is compiled alone.
 *
 * Include guards are the one #define allowed: the renderers put every
 * prelude helper in "#ifndef TC_X\n#define TC_X\n ... #endif" so that
 * kernels can share it. A guard is a bare "#define TC_X" on the line right
 * after "#ifndef TC_X", its name starts with TC_, and no code of a batched
 * source names a TC_ identifier, so a guard left defined for the later
 * kernels of a batch can only switch off an #ifndef TC_X group. A batch
 * holds each distinct item once; two items with one guard and different
 * text would have the second silently dropped, so the batch puts an
 * "#ifdef TC_X / #error" check before each guarded item: such a batch fails
 * to compile and its kernels are built one a run.
 * Cost: one pass over the source; a batch compares each item with the
 * distinct items kept so far (hash first, then the text).
 */
#include "runtime/cpu.h"

#include <string.h>

#define CUT_ITEMS 128 /* prelude items of a batched source (more: compiled alone) */

typedef struct {
    size_t start; /* first byte */
    size_t end;   /* one past the last */
} span;

/* a source cut by cut_source */
typedef struct {
    span items[CUT_ITEMS]; /* the prelude's items in order, each ending with its '\n' */
    int n_items;           /* how many */
    size_t body;           /* the kernel: from here to the end of the source */
} cut;

/* the top-level declaration being read */
typedef struct {
    bool is_open;    /* something of it was read */
    bool has_first;  /* its first word was read */
    bool is_typedef; /* that word is typedef */
    bool has_paren;  /* a '(' at brace depth 0 */
    bool has_eq;     /* an '=' at brace depth 0 */
    bool has_brace;  /* a '{' at brace depth 0 */
    bool is_fn;      /* its first '{' followed a ')': a function definition */
} decl;

typedef struct {
    const char *s;  /* the source */
    size_t i;       /* where the lexer is */
    const char *fn; /* the kernel's name */
    size_t fn_len;  /* its length */
    int braces;     /* depth of '{' */
    int pp;         /* depth of #if groups */
    char last;      /* the last code character read */
    decl d;         /* the declaration being read */
    size_t line;    /* where the current line starts */
    size_t item;    /* where the current item starts */
    bool has_code;  /* the current item holds more than blanks and comments */
    bool in_body;   /* fn was seen: the kernel started (at body) */
    size_t body;    /* where the kernel starts */
    bool ok;        /* nothing forbids a batch so far */
    cut *c;         /* where items go */
    const char *guard; /* the name of the #ifndef on the line before, else NULL */
    size_t guard_len;  /* its length */
} lexer;

static bool is_ident_start(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool is_ident_char(char ch) {
    return is_ident_start(ch) || (ch >= '0' && ch <= '9');
}

static bool word_is(const char *w, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(w, lit, n) == 0;
}

/* a name that only include guards may have */
static bool is_guard_name(const char *w, size_t n) {
    return n > 3 && memcmp(w, "TC_", 3) == 0;
}

/* the identifier at s + *i (blanks skipped first); its length, 0 if none */
static size_t next_word(const char *s, size_t *i) {
    while (s[*i] == ' ' || s[*i] == '\t') (*i)++;
    size_t n = 0;
    while (is_ident_char(s[*i + n])) n++;
    return n;
}

/* whether s + i holds nothing but blanks up to the line's end */
static bool is_rest_blank(const char *s, size_t i) {
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') i++;
    return s[i] == '\n' || s[i] == '\0';
}

/* code was read: the item and (at depth 0) a declaration are open */
static void mark_code(lexer *L) {
    L->guard = NULL; /* a guard's #define must follow its #ifndef */
    if (!L->has_code) L->item = L->line;
    L->has_code = true;
    if (L->braces == 0) L->d.is_open = true;
}

/* a top-level declaration ended: only types and functions may be batched */
static void decl_end(lexer *L) {
    const decl *d = &L->d;
    bool is_prototype = d->has_paren && !d->has_eq && !d->has_brace;
    if (!d->is_typedef && !d->is_fn && !is_prototype) L->ok = false;
    memset(&L->d, 0, sizeof L->d);
}

/* a line ended at L->i (past its '\n'): closes the item when nothing is open */
static void line_end(lexer *L) {
    L->line = L->i;
    if (L->braces != 0 || L->pp != 0 || L->d.is_open || !L->has_code) return;
    if (!L->in_body) {
        if (L->c->n_items == CUT_ITEMS) {
            L->ok = false;
            return;
        }
        L->c->items[L->c->n_items++] = (span){L->item, L->i};
    }
    L->has_code = false;
}

/* a preprocessor line from its '#' through its end (continuations included) */
static void directive(lexer *L) {
    const char *s = L->s;
    if (!L->has_code) L->item = L->line;
    L->has_code = true;
    size_t i = L->i + 1;
    size_t n = next_word(s, &i);
    const char *name = s + i;
    i += n;
    const char *guard = L->guard;
    size_t guard_len = L->guard_len;
    L->guard = NULL;
    if (word_is(name, n, "ifndef")) {
        size_t w = next_word(s, &i);
        if (is_guard_name(s + i, w) && is_rest_blank(s, i + w)) L->guard = s + i, L->guard_len = w;
        i += w;
    }
    if (word_is(name, n, "if") || word_is(name, n, "ifdef") || word_is(name, n, "ifndef")) L->pp++;
    else if (word_is(name, n, "endif")) L->ok &= L->pp-- > 0;
    else if (word_is(name, n, "else") || word_is(name, n, "elif")) L->ok &= L->pp > 0;
    else if (word_is(name, n, "define") && guard) { /* the guard of the #ifndef just read */
        size_t w = next_word(s, &i);
        L->ok &= w == guard_len && memcmp(s + i, guard, w) == 0 && is_rest_blank(s, i + w);
    } else if (!word_is(name, n, "include")) L->ok = false; /* define, undef, pragma, line, ... */
    for (; s[i] && s[i] != '\n'; i++) {
        if (s[i] == '\\' && s[i + 1] == '\n') i++;
        else if (s[i] == '/' && s[i + 1] == '*') L->ok = false; /* a comment inside: not ours */
    }
    L->i = s[i] ? i + 1 : i;
    line_end(L);
}

/* an identifier at L->i */
static void ident(lexer *L) {
    const char *s = L->s, *w = s + L->i;
    size_t n = 0;
    while (is_ident_char(w[n])) n++;
    L->i += n;
    mark_code(L);
    L->last = 'a';
    if (L->braces == 0 && !L->d.has_first) {
        L->d.has_first = true;
        L->d.is_typedef = word_is(w, n, "typedef");
    }
    if (n == L->fn_len && memcmp(w, L->fn, n) == 0 && !L->in_body) {
        L->in_body = true;
        L->body = L->item;
    }
    if (word_is(w, n, "_Pragma") || (word_is(w, n, "static") && L->braces > 0 && !L->in_body) ||
        is_guard_name(w, n)) /* code that names a TC_ identifier could see a guard */
        L->ok = false;
}

/* a string or character literal opened by s[L->i]; unterminated: not ours */
static void literal(lexer *L) {
    const char *s = L->s;
    char quote = s[L->i];
    size_t i = L->i + 1;
    while (s[i] && s[i] != quote && s[i] != '\n') i += s[i] == '\\' && s[i + 1] ? 2 : 1;
    if (s[i] != quote) L->ok = false;
    L->i = s[i] ? i + 1 : i;
    mark_code(L);
    L->last = quote;
}

/* one punctuation character */
static void punct(lexer *L, char ch) {
    mark_code(L);
    char before = L->last;
    L->last = ch;
    L->i++;
    if (ch == '{') {
        if (L->braces == 0 && !L->d.has_brace) {
            L->d.has_brace = true;
            L->d.is_fn = before == ')';
        }
        L->braces++;
    } else if (ch == '}') {
        if (--L->braces < 0) L->ok = false;
        else if (L->braces == 0 && L->d.is_fn) decl_end(L);
    } else if (L->braces == 0) {
        if (ch == ';') decl_end(L);
        else if (ch == '(') L->d.has_paren = true;
        else if (ch == '=') L->d.has_eq = true;
    }
}

/* skips a comment at L->i; false when it is not one */
static bool comment(lexer *L) {
    const char *s = L->s;
    if (s[L->i] != '/' || (s[L->i + 1] != '/' && s[L->i + 1] != '*')) return false;
    if (s[L->i + 1] == '/') {
        while (s[L->i] && s[L->i] != '\n') L->i++;
        return true;
    }
    const char *end = strstr(s + L->i + 2, "*/");
    if (!end) L->ok = false;
    L->i = end ? (size_t)(end - s) + 2 : strlen(s);
    return true;
}

/* cuts src into c; false when it may not join a batch */
static bool cut_source(const char *src, const char *fn_name, cut *c) {
    lexer L = {.s = src, .fn = fn_name, .fn_len = strlen(fn_name), .ok = true, .c = c};
    c->n_items = 0;
    bool at_line_start = true;
    while (L.ok && src[L.i]) {
        char ch = src[L.i];
        if (ch == '\n') {
            L.i++;
            line_end(&L);
            at_line_start = true;
        } else if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
            L.i++;
        } else if (at_line_start && ch == '#') {
            directive(&L);
        } else {
            at_line_start = false;
            if (comment(&L)) continue;
            if (ch == '"' || ch == '\'') literal(&L);
            else if (is_ident_start(ch)) ident(&L);
            else if (ch >= '0' && ch <= '9') { /* a number: its letters are no identifier */
                while (is_ident_char(src[L.i]) || src[L.i] == '.') L.i++;
                mark_code(&L);
                L.last = '0';
            } else punct(&L, ch);
        }
    }
    c->body = L.body;
    return L.ok && L.in_body && L.braces == 0 && L.pp == 0 && !L.d.is_open;
}

bool tc_cpu_batch_can_join(const char *src, const char *fn_name) {
    return tc_cpu_batch_kernel_bytes(src, fn_name) > 0;
}

size_t tc_cpu_batch_kernel_bytes(const char *src, const char *fn_name) {
    cut c;
    return *fn_name && cut_source(src, fn_name, &c) ? strlen(src) - c.body : 0;
}

char *tc_cpu_batch_symbol(const char *fn_name, const char *key) {
    size_t n = strlen(fn_name) + 2 + strlen(key) + 1;
    char *s = tc_malloc(n);
    if (s) snprintf(s, n, "%s__%s", fn_name, key);
    return s;
}

/* an item kept in a batch */
typedef struct {
    uint64_t hash;    /* of its text */
    const char *text; /* in one of the sources */
    size_t len;       /* bytes */
} kept;

/* whether the batch holds the item already; if not, keeps it (false) */
static bool item_seen(kept **ks, int *n, int *cap, const char *text, size_t len, bool *oom) {
    uint64_t h = tc_hash_bytes(text, len, 0);
    for (int i = 0; i < *n; i++)
        if ((*ks)[i].hash == h && (*ks)[i].len == len && memcmp((*ks)[i].text, text, len) == 0)
            return true;
    if (*n == *cap) {
        int cap2 = *cap ? 2 * *cap : 64;
        kept *k2 = tc_realloc(*ks, (size_t)cap2 * sizeof *k2);
        if (!k2) {
            *oom = true;
            return false;
        }
        *ks = k2, *cap = cap2;
    }
    (*ks)[(*n)++] = (kept){h, text, len};
    return false;
}

/* the length of the guard name of an item that starts "#ifndef TC_X\n"
 * (the name at t + 8), else 0 */
static size_t guard_of(const char *t, size_t len) {
    if (len < 9 || memcmp(t, "#ifndef ", 8) != 0) return 0;
    size_t n = 0;
    while (8 + n < len && is_ident_char(t[8 + n])) n++;
    return is_guard_name(t + 8, n) && 8 + n < len && t[8 + n] == '\n' ? n : 0;
}

char *tc_cpu_batch_text(const tc_cpu_kernel *ks, const int *members, int n) {
    tc_strbuf b = {0};
    kept *items = NULL;
    int n_kept = 0, cap = 0;
    bool oom = false, is_joinable = true;
    cut *c = tc_malloc(sizeof *c);
    oom = !c;
    tc_sb_printf(&b, "/* tinyc: %d kernels compiled together */\n", n);
    for (int m = 0; m < n && !oom && is_joinable; m++) {
        const tc_cpu_kernel *k = &ks[members[m]];
        if (!(is_joinable = cut_source(k->src, k->fn_name, c))) break;
        for (int i = 0; i < c->n_items && !oom; i++) {
            const char *t = k->src + c->items[i].start;
            size_t len = c->items[i].end - c->items[i].start;
            if (!item_seen(&items, &n_kept, &cap, t, len, &oom)) {
                size_t g = guard_of(t, len);
                if (g)
                    tc_sb_printf(&b, "#ifdef %.*s\n#error \"two guarded items named %.*s differ\"\n#endif\n",
                                 (int)g, t + 8, (int)g, t + 8);
                tc_sb_printf(&b, "%.*s", (int)len, t);
            }
        }
        tc_sb_printf(&b, "#define %s %s__%s\n%s\n#undef %s\n", k->fn_name, k->fn_name, k->key,
                     k->src + c->body, k->fn_name);
    }
    tc_free(items);
    tc_free(c);
    if (!is_joinable) {
        tc_sb_free(&b);
        TC_INTERNAL("CPU compile: a kernel that may not join a batch is in one");
        return NULL;
    }
    if (oom || b.failed || !b.s) {
        tc_sb_free(&b);
        tc_error_set(TC_ERR_MEMORY, "CPU compile: out of memory building a batch of %d kernels", n);
        return NULL;
    }
    return b.s;
}
