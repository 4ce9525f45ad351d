record() { # record RESULT [ERROR]
    mkdir -p "$(dirname "$PROGRESS")"
    local err=${2:-}
    # JSON: backslashes and quotes escaped, every control character (TAB, CR from
    # coreos-installer's progress, LF, ESC) a space.
    err=${err//\\/\\\\}; err=${err//\"/\\\"}; err=${err//[[:cntrl:]]/ }
    printf '{"stage":"%s","result":"%s","lastError":"%s","time":"%s"}\n' \
        "$stage" "$1" "$err" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$PROGRESS.tmp" && mv "$PROGRESS.tmp" "$PROGRESS"
    echo "$(basename "$0"): $stage: $1 ${2:-}"
}
