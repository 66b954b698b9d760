"""Headless Chromium for the report checks and the viewer benchmark: Debian's
chromium and chromium-driver through Selenium, with the flags the project
uses, a fresh profile directory, console messages kept, and a sanitizer
build's preload kept away from the (uninstrumented) browser.  Selenium is
imported here only, so the rest of the harness needs the standard library.
"""
import os

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000")


def chromium(profile_dir):
    """A new headless Chromium driver using profile_dir as its user data."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in FLAGS + (f"--user-data-dir={profile_dir}",):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return webdriver.Chrome(service=Service(CHROMEDRIVER, env=env), options=options)
