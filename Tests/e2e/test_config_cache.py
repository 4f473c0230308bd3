"""The cache of parsed plugins.d files (issue 33): `config check` and `sources` say the same
with it (filled, then served from it) and without it, and an edit is seen at once."""
import os


def plugins(tidings, n, interval="1m"):
    for i in range(n):
        tidings.write_plugin(f"s{i:03d}.toml", f"""
            provider = "http-json"
            url = "http://127.0.0.1:9/{i}"
            interval = "{interval}"
        """)


def outputs(tidings, env):
    return [(r.code, r.stdout, r.stderr) for r in
            (tidings.run("config", "check", env=env), tidings.run("sources", env=env))]


def cache_files(tidings):
    d = tidings.root / "cache" / "tidings"
    return sorted(os.listdir(d)) if d.exists() else []


def test_config_check_and_sources_agree_with_and_without_the_cache(tidings):
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
    """)
    plugins(tidings, 40)
    uncached = outputs(tidings, {"TIDINGS_CONFIG_CACHE": "off"})
    assert cache_files(tidings) == []
    assert uncached[0][0] == 0, uncached
    assert "OK: 40 sources" in uncached[0][1]
    filling = outputs(tidings, None)
    files = cache_files(tidings)
    assert len(files) == 1 and files[0].startswith("config-cache-"), files
    path = tidings.root / "cache" / "tidings" / files[0]
    assert os.stat(path).st_mode & 0o777 == 0o600
    served = outputs(tidings, None)
    assert filling == uncached
    assert served == uncached

    # An edit to the same size, with the same mtime, is seen (the cache is keyed by content).
    p = tidings.plugins / "s007.toml"
    st = os.stat(p)
    text = p.read_text()
    p.write_text(text.replace('"1m"', '"2m"'))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size
    after = outputs(tidings, None)
    assert after == outputs(tidings, {"TIDINGS_CONFIG_CACHE": "off"})
    line = next(l for l in after[1][1].splitlines() if l.startswith("s007 "))
    assert "every 2m" in line, line


def test_errors_from_cached_plugin_files_keep_file_and_line(tidings):
    plugins(tidings, 5)
    tidings.write_plugin("s003.toml", """
        provider = "http-json"
        url = "http://127.0.0.1:9/3"
        bogus = 1
    """)
    uncached = tidings.run("config", "check", env={"TIDINGS_CONFIG_CACHE": "off"})
    assert uncached.code == 78, uncached
    assert f"{tidings.plugins}/s003.toml:4: source \"s003\": unknown key 'bogus'" in uncached.stderr, uncached.stderr
    for _ in range(2):  # fills the cache, then is served from it
        r = tidings.run("config", "check")
        assert (r.code, r.stdout, r.stderr) == (uncached.code, uncached.stdout, uncached.stderr)
    assert len(cache_files(tidings)) == 1


def test_a_secret_written_in_a_plugin_file_is_not_copied_into_the_cache(tidings):
    """A plugin file holding an inline secret (a credential header, a password in its URL) is read
    on every load and never cached; one that names its secret's file is."""
    tidings.write_config("""
        [sinks.console]
        type = "stdout"
    """)
    plugins(tidings, 3)
    tidings.write_plugin("header.toml", """
        provider = "http-json"
        url = "http://127.0.0.1:9/h"
        headers = { Authorization = "Bearer inline-header-s3cret" }
    """)
    tidings.write_plugin("password.toml", """
        provider = "http-json"
        url = "http://reader:inline-url-s3cret@127.0.0.1:9/p"
    """)
    key = tidings.write_secret("key", "from-a-file-s3cret")
    tidings.write_plugin("filed.toml", f"""
        provider = "http-json"
        url = "http://127.0.0.1:9/f"
        headers = {{ Authorization_file = "{key}" }}
    """)
    for _ in range(2):  # fills the cache, then is served from it
        outs = outputs(tidings, None)
        assert outs[0][0] == 0 and "OK: 6 sources" in outs[0][1], outs
    files = cache_files(tidings)
    assert len(files) == 1, files
    blob = (tidings.root / "cache" / "tidings" / files[0]).read_bytes()
    assert b"inline-header-s3cret" not in blob and b"inline-url-s3cret" not in blob
    assert str(key).encode() in blob, "the file naming its secret's file is cached"
    assert b"from-a-file-s3cret" not in blob
