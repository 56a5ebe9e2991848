#!/usr/bin/env python3
"""Checks that the documentation agrees with what ships.

Each check is one CTest test (tests/docs/CMakeLists.txt):

  ctl-commands   every `weightpathctl ...` command line in the alert texts
                 (deploy/prometheus and the Helm chart's copy), the Helm
                 NOTES and every README names a command weightpathctl has
                 (and an action of it, for commands that take one), and
                 every --flag it passes is in that command's --help; and
                 every command weightpathctl lists has a row in
                 ctl/README.md's table.
  alert-table    deploy/prometheus/README.md's table lists exactly the rules
                 of weightpath-rules.yaml, in their order.
  role-table     the top-level README's role table names every FleetAdmin RPC
                 of server/api/fleet_admin_roles.cc under the role it needs.
  helm-commands  every helm install/upgrade/template/lint and helm_render
                 line of helm/README.md renders with tests/helm's renderer.
  prometheus-config
                 deploy/prometheus/prometheus.yml passes promtool check config.

usage: docs_test.py CHECK --source DIR [--ctl FILE] [--helm-render FILE]
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

failures = []


def fail(where, message):
    failures.append(f"{where}: {message}")


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)


def markdown_files(source):
    skip = {"build", "node_modules", ".git", "data"}
    for root, dirs, files in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(root, name)


def code_lines(path):
    """(line number, text) of every line in a fenced or indented code block,
    with backslash continuations joined, and of every inline code span."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fenced = False
    previous_blank = True
    in_indented = False
    pending = None  # (line number, text) of a line continued with a backslash
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            previous_blank = False
            continue
        indented = not fenced and line.startswith("    ") and (previous_blank or in_indented)
        in_indented = indented or (in_indented and line.strip() == "")
        previous_blank = line.strip() == ""
        if fenced or indented:
            text = line.strip()
            if pending is not None:
                pending = (pending[0], pending[1] + " " + text)
            else:
                pending = (number, text)
            if pending[1].endswith("\\"):
                pending = (pending[0], pending[1][:-1])
                continue
            yield pending
            pending = None
            continue
        pending = None
    # Inline spans, which may wrap onto the next line of a paragraph.
    text = "\n".join(lines)
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        number = text.count("\n", 0, match.start()) + 1
        yield number, " ".join(match.group(1).split())


# --- weightpathctl command lines --------------------------------------------

CTL_IN_TEXT = re.compile(r"(?:^|[\s(/'\"`])weightpathctl\s+(.*)")


def command_words(rest, prose):
    """The words of one command line after `weightpathctl`: cut where a shell
    pipeline, redirect or comment starts, or, in prose, where the sentence
    goes on."""
    rest = re.sub(r"\{\{[^}]*\}\}", "ID", rest)
    cut = re.split(r"\s(?:\||&&|;|>|#)\s|;\s|\)|$", rest, maxsplit=1)[0]
    if prose:
        cut = re.split(r"[;)]|\.\s|\.$", cut, maxsplit=1)[0]
    return cut.split()


class Ctl:
    def __init__(self, binary):
        self.binary = binary
        self.helps = {}
        top = self.help([])
        self.commands = set()
        in_commands = False
        for line in top.split("\n"):
            if line.startswith("commands:"):
                in_commands = True
                continue
            if in_commands:
                match = re.match(r"\s+([a-z][a-z-]*)\s", line)
                if match:
                    self.commands.add(match.group(1))
                elif line.strip() == "":
                    in_commands = False
        if not self.commands:
            raise SystemExit(f"{binary} --help lists no commands:\n{top}")
        self.commands.add("help")

    def help(self, words):
        key = tuple(words)
        if key not in self.helps:
            result = run([self.binary] + list(words) + ["--help"])
            self.helps[key] = (result.stdout + result.stderr) if result.returncode == 0 else None
        return self.helps[key]

    def actions(self, command):
        """The actions of a command that takes one (repo init, rollout status,
        device show): the words its usage lines put right after the command,
        or its `actions:` list; empty for a command that takes none."""
        text = self.help([command]) or ""
        found = set()
        for match in re.finditer(r"weightpathctl " + re.escape(command) + r" ([a-z][a-z|-]*)(?=[\s\]]|$)",
                                 text):
            found.update(match.group(1).split("|"))
        in_actions = False
        for line in text.split("\n"):
            if line.startswith("actions:"):
                in_actions = True
                continue
            if in_actions:
                match = re.match(r"\s+([a-z][a-z-]*)\s", line)
                if match:
                    found.add(match.group(1))
                elif line.strip() == "":
                    in_actions = False
        return found

    @staticmethod
    def flags_in(text):
        return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])", text))

    def check(self, words, where):
        if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]):
            return  # `weightpathctl <command> --help` and the like
        command = words[0]
        if command not in self.commands:
            fail(where, f"weightpathctl has no command '{command}' (it has "
                        f"{', '.join(sorted(self.commands))}): {' '.join(words)}")
            return
        if command == "help":
            return
        help_text = self.help([command]) or ""
        actions = self.actions(command)
        if actions and len(words) > 1 and not words[1].startswith("-"):
            action = words[1]
            if action not in actions:
                fail(where, f"'weightpathctl {command}' has no action '{action}' "
                            f"(it has {', '.join(sorted(actions))}): {' '.join(words)}")
                return
            help_text += self.help([command, action]) or ""
        known = self.flags_in(help_text)
        for word in words[1:]:
            flag = re.sub(r"^[\[(]+", "", word).split("=")[0].rstrip("]),.:")
            if not re.fullmatch(r"--[a-z][a-z0-9-]*|-[a-zA-Z]", flag):
                continue
            if flag not in known:
                fail(where, f"'weightpathctl {' '.join(words[:2] if actions else words[:1])}' "
                            f"has no flag {flag} in its --help: {' '.join(words)}")


def alert_texts(path):
    with open(path, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            for key, text in (rule.get("annotations") or {}).items():
                yield f"{path} {rule.get('alert')}.{key}", text


def check_ctl_commands(source, ctl_binary):
    ctl = Ctl(ctl_binary)
    checked = 0
    for rules in ("deploy/prometheus/weightpath-rules.yaml",
                  "helm/weightpath/files/prometheus-rules.yaml"):
        for where, text in alert_texts(os.path.join(source, rules)):
            for match in CTL_IN_TEXT.finditer(text):
                ctl.check(command_words(match.group(1), prose=True), where)
                checked += 1
    notes = os.path.join(source, "helm/weightpath/templates/NOTES.txt")
    with open(notes, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            for match in CTL_IN_TEXT.finditer(line):
                ctl.check(command_words(match.group(1), prose=False), f"{notes}:{number}")
                checked += 1
    for path in markdown_files(source):
        for number, text in code_lines(path):
            for match in CTL_IN_TEXT.finditer(text):
                ctl.check(command_words(match.group(1), prose=False),
                          f"{os.path.relpath(path, source)}:{number}")
                checked += 1
    # ctl/README.md's table names commands without the program's name; a
    # cell may list several, `a \| b`, where a bare action continues the
    # previous command.
    ctl_readme = os.path.join(source, "ctl/README.md")
    documented = set()
    with open(ctl_readme, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.startswith("| `"):
                continue
            first_cell = re.split(r"(?<!\\)\|", line)[1]
            for span in re.findall(r"`([^`]+)`", first_cell):
                command = None
                for part in span.split("\\|"):
                    words = part.split()
                    if not words:
                        continue
                    if words[0] in ctl.commands:
                        command = words[0]
                    elif command is not None:
                        words = [command] + words
                    else:
                        continue
                    documented.add(words[0])
                    ctl.check(words, f"ctl/README.md:{number}")
                    checked += 1
    for command in sorted(ctl.commands - {"help"} - documented):
        fail("ctl/README.md", f"the command table has no row for 'weightpathctl {command}'")
    return checked


# --- the alert table ----------------------------------------------------------

def check_alert_table(source):
    rules_path = os.path.join(source, "deploy/prometheus/weightpath-rules.yaml")
    with open(rules_path, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    alerts = [rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    readme = os.path.join(source, "deploy/prometheus/README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    listed = re.findall(r"^\| (Weightpath\w+) \|", text, flags=re.M)
    if listed != alerts:
        missing = [a for a in alerts if a not in listed]
        extra = [a for a in listed if a not in alerts]
        fail("deploy/prometheus/README.md",
             f"the alert table lists {len(listed)} alerts, weightpath-rules.yaml has {len(alerts)}"
             + (f"; missing: {', '.join(missing)}" if missing else "")
             + (f"; not rules: {', '.join(extra)}" if extra else "")
             + ("; same alerts in another order" if not missing and not extra else ""))
    counts = re.findall(r"every rule of `weightpath-rules.yaml` \((\d+)\)", text)
    for count in counts:
        if int(count) != len(alerts):
            fail("deploy/prometheus/README.md", f"says {count} rules; weightpath-rules.yaml has {len(alerts)}")
    return len(alerts)


# --- the role table -----------------------------------------------------------

def check_role_table(source):
    with open(os.path.join(source, "server/api/fleet_admin_roles.cc"), encoding="utf-8") as f:
        rows = re.findall(r'\{"(\w+)", Role::k(\w+)\}', f.read())
    if not rows:
        fail("server/api/fleet_admin_roles.cc", "no {\"Method\", Role::kX} rows found")
        return 0
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        text = f.read()
    table = {}
    for role, cell in re.findall(r"^\| `(viewer|operator|admin)` \| (.*) \|$", text, flags=re.M):
        table[role] = set(re.findall(r"`(\w+)`", cell))
    for method, role in rows:
        role = role.lower()
        if role not in table:
            fail("README.md", f"the role table has no `{role}` row (for {method})")
        elif method not in table[role]:
            fail("README.md", f"the role table's `{role}` row omits {method} "
                              f"(server/api/fleet_admin_roles.cc gives it role {role})")
        for other, methods in table.items():
            if other != role and method in methods:
                fail("README.md", f"the role table lists {method} under `{other}`; it needs {role}")
    return len(rows)


# --- helm/README.md's commands ------------------------------------------------

HELM_LINE = re.compile(r"(?:^|\s)(helm (?:install|upgrade|template|lint)\s.*|\S*helm_render\s.*)")


def check_helm_commands(source, helm_render):
    if not helm_render or not os.access(helm_render, os.X_OK):
        fail("helm/README.md", f"no helm_render at '{helm_render}' (build the helm_render_tool target)")
        return 0
    readme = os.path.join(source, "helm/README.md")
    checked = 0
    with tempfile.TemporaryDirectory(prefix="weightpath-docs-") as scratch:
        for number, text in code_lines(readme):
            match = HELM_LINE.search(text)
            if not match:
                continue
            words = shlex.split(match.group(1))
            if words[0].endswith("helm_render"):
                args = words[1:]
                args = [os.path.join(source, a) if a == "helm/weightpath" else a for a in args]
            else:
                # helm VERB [RELEASE] CHART flags: the chart is helm/weightpath.
                rest = words[2:]
                if "helm/weightpath" not in rest:
                    continue  # `helm template` alone, in prose
                rest = rest[rest.index("helm/weightpath") + 1:]
                args = ["--chart", os.path.join(source, "helm/weightpath")]
                # "..." stands for the transport chosen above it; --reuse-values
                # for an install's values. Both are a plaintext install here,
                # unless the line chooses TLS itself.
                chooses_tls = any(w.startswith("tls.") for w in rest)
                if ("..." in rest or "--reuse-values" in rest) and not chooses_tls:
                    args += ["--set", "insecure=true"]
                index = 0
                while index < len(rest):
                    word = rest[index]
                    if word in ("...", "--reuse-values"):
                        index += 1
                        continue
                    if word in ("--set", "--set-file", "--values", "-f") and index + 1 < len(rest):
                        value = rest[index + 1]
                        if word == "--set-file":
                            key, _, path = value.partition("=")
                            local = os.path.join(scratch, os.path.basename(path))
                            with open(local, "w", encoding="utf-8") as f:
                                f.write("# placeholder for " + path + "\n")
                            value = f"{key}={local}"
                        args += ["--values" if word == "-f" else word, value]
                        index += 2
                        continue
                    fail(f"helm/README.md:{number}",
                         f"'{word}' is not a flag the renderer checks: {match.group(1)}")
                    break
            result = run([helm_render] + args)
            checked += 1
            if result.returncode != 0:
                fail(f"helm/README.md:{number}",
                     f"does not render: {match.group(1)}\n    {result.stderr.strip()}")
    return checked


def check_prometheus_config(source):
    promtool = shutil.which("promtool")
    if promtool is None:
        fail("deploy/prometheus/prometheus.yml", "promtool not found (scripts/install-deps installs it)")
        return 0
    result = run([promtool, "check", "config", "prometheus.yml"],
                 cwd=os.path.join(source, "deploy/prometheus"))
    if result.returncode != 0:
        fail("deploy/prometheus/prometheus.yml", result.stdout + result.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=["ctl-commands", "alert-table", "role-table",
                                          "helm-commands", "prometheus-config"])
    parser.add_argument("--source", required=True)
    parser.add_argument("--ctl")
    parser.add_argument("--helm-render")
    options = parser.parse_args()
    source = os.path.abspath(options.source)
    if options.check == "ctl-commands":
        count = check_ctl_commands(source, options.ctl)
    elif options.check == "alert-table":
        count = check_alert_table(source)
    elif options.check == "role-table":
        count = check_role_table(source)
    elif options.check == "helm-commands":
        count = check_helm_commands(source, options.helm_render)
    else:
        count = check_prometheus_config(source)
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{options.check}: {count} checked, {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
