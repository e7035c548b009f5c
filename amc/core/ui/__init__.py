"""The screen as the kernel's pure code sees it: a UI dump's elements, selectors over them,
when a screen has settled, what changed between two screens, and where set-of-marks labels
go. No IO: the Host Agent takes the dumps and the frames and hands them in."""
