/// The live page `feedsync serve` answers at `GET /`: one self-contained HTML document (inline CSS and script, no
/// external references) showing the feed, a post's detail with its like button, and live updates from
/// `/api/events` (`Docs/HTTP.md`).
///
/// The page sends `Authorization: Bearer TOKEN` with a token typed into its field (kept in `localStorage`) or, when
/// the server runs with `--demo`, picked from `GET /api/demo/tokens`; `#user=alice` picks a demo user. It reads the
/// event stream with `fetch` rather than `EventSource`, which cannot send the header (a token never goes in a URL),
/// resuming with `Last-Event-ID`; without a token it shows the feed but no live updates. It builds every element
/// from text nodes, never from markup, so no post text is ever parsed as HTML. Elements the browser test uses carry
/// `data-testid` attributes (`feed`, `post-ID`, `count-ID`, `open-ID`, `delete-ID`, `like-button`, `delete-button`,
/// `back`, `status`, `live`, `erase-account`). The viewer's own posts have a delete button; a deleted post's card goes
/// from every page at once (`postDeleted`). "Delete my account" erases the viewer (`DELETE /api/me`, after a second
/// click), and a page whose user was erased, there or anywhere else (`event: erased`), forgets its token.
package enum LivePage {
    /// The document, UTF-8.
    package static let html: String = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width,initial-scale=1">
        <title>FeedSync</title>
        <style>
        :root{color-scheme:light dark;--fg:#1d1d1f;--bg:#f2f2f5;--card:#fff;--mute:#6e6e73;--accent:#d70040}
        @media(prefers-color-scheme:dark){:root{--fg:#f2f2f5;--bg:#000;--card:#1c1c1e;--mute:#98989d}}
        *{box-sizing:border-box}
        body{margin:0;font:16px/1.5 system-ui,sans-serif;color:var(--fg);background:var(--bg)}
        header{display:flex;flex-wrap:wrap;gap:.5em 1em;align-items:center;padding:.6em 1em;background:var(--card);
        border-bottom:1px solid #8884;position:sticky;top:0;z-index:1}
        h1{font-size:1.15em;margin:0 auto 0 0}
        main{max-width:44em;margin:0 auto;padding:1em}
        ul{list-style:none;margin:0;padding:0}
        .card{display:block;background:var(--card);border-radius:12px;padding:.9em 1em;margin:0 0 .75em;box-shadow:0 1px 2px #0002}
        .who{font-weight:600}.when,.mute{color:var(--mute);font-size:.85em}
        .open{all:unset;display:block;cursor:pointer;width:100%}
        .text{display:block;white-space:pre-wrap;overflow-wrap:anywhere}
        .clip{display:-webkit-box;-webkit-line-clamp:4;-webkit-box-orient:vertical;overflow:hidden}
        .heart{display:inline-block;margin-top:.4em}
        .del{float:right;font-size:.85em}
        button{font:inherit;padding:.3em .9em;border-radius:8px;border:1px solid #8886;background:var(--card);color:var(--fg);
        cursor:pointer}
        button[aria-pressed=true]{background:var(--accent);border-color:var(--accent);color:#fff}
        :focus-visible{outline:2px solid var(--accent);outline-offset:2px}
        input,select{font:inherit;max-width:12em}
        #status{min-height:1.5em;margin:0 0 .5em;color:var(--accent)}
        [hidden]{display:none!important}
        </style>
        </head>
        <body>
        <header>
        <h1>FeedSync</h1>
        <span id="demo" hidden><label for="user">Demo user</label> <select id="user" data-testid="user-select"></select></span>
        <form id="login"><label for="token">Token</label> <input id="token" type="password" autocomplete="off"
        data-testid="token"> <button>Use</button></form>
        <span class="mute" data-testid="viewer" id="viewer"></span>
        <button id="erase" class="del" data-testid="erase-account" hidden>Delete my account</button>
        <span class="mute" data-testid="live" id="live" data-state="closed">○ offline</span>
        </header>
        <main>
        <p id="status" role="status" aria-live="polite" data-testid="status"></p>
        <section id="feedView" aria-label="Feed"><ul id="feed" data-testid="feed"></ul>
        <button id="more" data-testid="more" hidden>Older posts</button></section>
        <section id="detail" aria-label="Post" data-testid="detail" hidden>
        <p><button id="back" data-testid="back">← Back</button></p>
        <article class="card"><p><span class="who" id="dAuthor" data-testid="detail-author"></span>
        <time class="when" id="dTime" data-testid="detail-time"></time></p>
        <span class="text" id="dText" data-testid="detail-text"></span>
        <p><button id="like" data-testid="like-button" aria-pressed="false"></button>
        <span id="dCount" data-testid="detail-count"></span>
        <button id="del" class="del" data-testid="delete-button" hidden>Delete</button></p></article>
        </section>
        </main>
        <script>
        'use strict';
        const $ = (id) => document.getElementById(id), KEY = 'feedsync.token';
        const S = {token: '', viewer: null, demo: [], posts: new Map(), els: new Map(), gone: new Set(), cursor: null, open: null, seq: 0,
          ctl: null};
        const say = (m) => { $('status').textContent = m || ''; };
        const path = (id) => '/api/posts/' + encodeURIComponent(id);
        const when = (t) => { const d = new Date(t); return isNaN(d) ? t : d.toLocaleString(); };
        // Elements are built with text nodes only: no markup from data ever reaches the parser.
        function el(tag, attrs, ...kids) {
          const e = document.createElement(tag);
          for (const k in attrs) e.setAttribute(k, attrs[k]);
          e.append(...kids);
          return e;
        }
        async function api(method, url) {
          const headers = S.token ? {Authorization: 'Bearer ' + S.token} : {};
          const r = await fetch(url, {method, headers});
          const j = await r.json().catch(() => null);
          if (!r.ok) throw Object.assign(new Error((j && j.error) || r.status + ' ' + r.statusText), {status: r.status});
          return j;
        }
        function hearts(p, e) {
          e.textContent = (p.liked ? '❤️ ' : '🤍 ') + p.likeCount;
          e.dataset.count = p.likeCount;
          e.dataset.liked = p.liked;
          e.setAttribute('aria-label', p.likeCount + (p.likeCount == 1 ? ' like' : ' likes') + (p.liked ? ', liked by you' : ''));
        }
        function item(p) {
          const open = el('button', {class: 'open', 'data-testid': 'open-' + p.id},
            el('span', {class: 'who'}, p.author), ' ', el('time', {class: 'when', datetime: p.createdAt}, when(p.createdAt)),
            el('span', {class: 'text clip'}, p.body));
          open.onclick = () => show(p.id);
          const count = el('span', {class: 'heart', 'data-testid': 'count-' + p.id});
          hearts(p, count);
          const li = el('li', {class: 'card', 'data-testid': 'post-' + p.id}, open, count);
          if (S.viewer && p.author === S.viewer) {
            const del = el('button', {class: 'del', 'data-testid': 'delete-' + p.id}, 'Delete');
            del.onclick = () => remove(p.id);
            li.append(del);
          }
          return li;
        }
        function add(p, top, seq) {
          if (S.posts.has(p.id) || S.gone.has(p.id)) return;
          p.seq = seq;
          S.posts.set(p.id, p);
          const li = item(p);
          S.els.set(p.id, li);
          top ? $('feed').prepend(li) : $('feed').append(li);
        }
        function paint(p) {
          const li = S.els.get(p.id);
          if (li) hearts(p, li.querySelector('.heart'));
          if (S.open !== p.id) return;
          $('dAuthor').textContent = p.author;
          $('dTime').textContent = when(p.createdAt);
          $('dTime').setAttribute('datetime', p.createdAt);
          $('dText').textContent = p.body;
          hearts(p, $('dCount'));
          $('like').textContent = p.liked ? 'Unlike' : 'Like';
          $('like').setAttribute('aria-pressed', p.liked);
          $('del').hidden = !(S.viewer && p.author === S.viewer);
        }
        // A deleted post leaves the page (its id is never used again).
        function drop(id) {
          S.gone.add(id);
          const li = S.els.get(id);
          if (li) li.remove();
          S.els.delete(id); S.posts.delete(id);
          if (S.open === id) { show(null); say('the post was deleted'); }
        }
        async function remove(id) {
          try { await api('DELETE', path(id)); drop(id); } catch (e) { say(e.message); }
        }
        // A state is applied only when it is at least as new as the one shown (events and like answers may cross).
        function apply(p, seq, count, liked) {
          if (seq != null && seq < p.seq) return;
          if (seq != null) p.seq = seq;
          p.likeCount = count;
          if (liked != null) p.liked = liked;
          paint(p);
        }
        function show(id) {
          S.open = id;
          $('feedView').hidden = !!id;
          $('detail').hidden = !id;
          if (id) { paint(S.posts.get(id)); $('back').focus(); }
        }
        async function more() {
          const page = await api('GET', '/api/feed?limit=20' + (S.cursor ? '&before=' + encodeURIComponent(S.cursor) : ''));
          S.viewer = page.viewer;
          $('erase').hidden = !(page.viewer && S.token);
          $('viewer').textContent = page.viewer ? 'as ' + page.viewer : 'anonymous';
          for (const p of page.posts) add(p, false, S.seq);
          S.cursor = page.nextCursor;
          $('more').hidden = !S.cursor;
        }
        // The account is gone (erased here or anywhere else): forget its token.
        function signedOut() {
          if (S.ctl) S.ctl.abort();
          S.token = '';
          try { localStorage.removeItem(KEY); } catch (e) {}
          $('erase').hidden = true;
          live('closed', '○ signed out');
          say('this account was deleted');
        }
        function live(state, text) { $('live').dataset.state = state; $('live').textContent = text; }
        // The event stream, read with fetch: EventSource cannot send the token, and a token never goes in a URL. It
        // resumes after the last id seen (Last-Event-ID) 1 s after an end or an error, up to 10 s while it fails.
        async function listen(ctl) {
          live('connecting', '○ connecting…');
          for (let delay = 1000; ; delay = Math.min(2 * delay, 10000)) {
            try {
              const r = await fetch('/api/events', {signal: ctl.signal, cache: 'no-store', headers:
                {Authorization: 'Bearer ' + S.token, 'Last-Event-ID': lastID(), Accept: 'text/event-stream'}});
              if (r.status == 401) {
                live('closed', '○ sign in for live updates');
                return say((await r.json().catch(() => ({}))).error || 'the token was refused');
              }
              if (!r.ok || !r.body) throw new Error(r.status + ' ' + r.statusText);
              live('open', '● live');
              delay = 1000;
              const end = await read(r.body.getReader());
              if (end == 'historyPruned' || end == 'historyRewritten') return start();
              if (end == 'erased') return signedOut();
            } catch (e) {}
            if (ctl.signal.aborted) return;
            live('connecting', '○ reconnecting…');
            await new Promise((ok) => setTimeout(ok, delay));
            if (ctl.signal.aborted) return;
          }
        }
        // Server-sent events: `id:`, `event:`, `data:` lines, dispatched at each blank line; returns how the stream ended.
        async function read(reader) {
          const text = new TextDecoder();
          let rest = '', type = '', data = null, id = null;
          for (;;) {
            const {value, done} = await reader.read();
            if (done) return 'end';
            const lines = (rest + text.decode(value, {stream: true})).split('\n');
            rest = lines.pop();
            for (const line of lines.map((l) => l.replace(/\r$/, ''))) {
              if (!line) {
                if (/^\d+(\.[0-9a-f]{8})?$/.test(id) && parseInt(id) >= S.seq) { S.seq = parseInt(id); S.lastID = id; }
                if (data != null && dispatch(type || 'message', data)) return type;
                type = ''; data = null;
                continue;
              }
              const i = line.indexOf(':'), field = i < 0 ? line : line.slice(0, i);
              const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
              if (field == 'event') type = v;
              else if (field == 'data') data = data == null ? v : data + '\n' + v;
              else if (field == 'id') id = v;
            }
          }
        }
        // The last id (seq.check), or the seq once the page moved past it.
        const lastID = () => S.lastID && parseInt(S.lastID) == S.seq ? S.lastID : String(S.seq);
        // True when the stream is to be left (history pruned or rewritten, user erased); `behind` resumes like any end.
        function dispatch(type, data) {
          if (type == 'message') try { onEvent(JSON.parse(data)); } catch (e) { say(e.message); }
          return type == 'historyPruned' || type == 'historyRewritten' || type == 'erased';
        }
        function onEvent(e) {
          S.seq = Math.max(S.seq, e.seq);
          const p = S.posts.get(e.postID);
          if (e.kind == 'postDeleted') {
            drop(e.postID);
          } else if (e.kind == 'postCreated' && !p) {
            // A post deleted since is 404: its postDeleted follows.
            api('GET', path(e.postID)).then((q) => add(q, true, e.seq), (x) => x.status == 404 || say(x.message));
          } else if (p && e.likeCount != null) {
            const mine = e.userID && e.userID === S.viewer && (e.kind == 'liked' || e.kind == 'unliked');
            apply(p, e.seq, e.likeCount, mine ? e.kind == 'liked' : null);
          }
        }
        async function start() {
          if (S.ctl) S.ctl.abort();
          const ctl = S.ctl = new AbortController();
          S.posts.clear(); S.els.clear(); S.cursor = null; S.lastID = null;
          delete $('erase').dataset.armed; $('erase').textContent = 'Delete my account';
          $('feed').replaceChildren();
          show(null);
          try {
            S.seq = (await api('GET', '/health')).lastSeq;
            await more();
            say('');
            if (ctl.signal.aborted) return;
            S.token ? listen(ctl) : live('closed', '○ sign in for live updates');
          } catch (e) { if (!ctl.signal.aborted) { live('closed', '○ offline'); say(e.message); } }
        }
        function use(token) {
          S.token = token;
          try { localStorage.setItem(KEY, token); } catch (e) {}
          start();
        }
        async function init() {
          const m = /user=([^&]*)/.exec(location.hash), want = m && decodeURIComponent(m[1]);
          try { const r = await fetch('/api/demo/tokens'); if (r.ok) S.demo = await r.json(); } catch (e) {}
          const saved = localStorage.getItem(KEY) || '', sel = $('user');
          if (!S.demo.length) return use(saved);
          sel.replaceChildren(...S.demo.map((d) => el('option', {value: d.user}, d.name + ' (' + d.user + ')')));
          $('demo').hidden = false;
          const d = S.demo.find((x) => x.user === want) || S.demo.find((x) => x.token === saved) || S.demo[0];
          sel.value = d.user;
          use(d.token);
          if (want && d.user !== want) say('no demo user ' + want);
        }
        $('user').onchange = () => use(S.demo.find((x) => x.user === $('user').value).token);
        $('login').onsubmit = (e) => { e.preventDefault(); use($('token').value.trim()); $('token').value = ''; };
        $('more').onclick = () => more().catch((e) => say(e.message));
        $('del').onclick = () => remove(S.open);
        // Erasing takes a second click: the first one says what goes.
        $('erase').onclick = async () => {
          const b = $('erase');
          if (!b.dataset.armed) {
            b.dataset.armed = '1'; b.textContent = 'Yes, delete my account';
            return say('your posts, likes and tokens will be erased; click again to confirm');
          }
          try { await api('DELETE', '/api/me'); signedOut(); } catch (e) { say(e.message); }
        };
        $('back').onclick = () => { const id = S.open; show(null); const li = S.els.get(id); if (li) li.firstChild.focus(); };
        $('like').onclick = async () => {
          const p = S.posts.get(S.open), b = $('like');
          b.disabled = true;
          try {
            const r = await api(p.liked ? 'DELETE' : 'PUT', path(p.id) + '/like');
            apply(p, r.seq, r.likeCount, r.liked);
            say('');
          } catch (e) { say(e.message); } finally { b.disabled = false; }
        };
        addEventListener('hashchange', init);
        init();
        </script>
        </body>
        </html>
        """#
}
