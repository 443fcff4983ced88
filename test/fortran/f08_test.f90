! SPDX-License-Identifier: BSD-3-Clause
! The same checks through `use mpi_f08` (handles as TYPE(MPI_...), TYPE(MPI_Status),
! ierror left out): typed Isend/Irecv completed by Waitall, Wait, Waitany and
! Test, Recv, Pack/Unpack and Allreduce, against hand-computed references.
program f08_test
  use mpi_f08
  implicit none
  integer, parameter :: n = 4096
  integer :: rank, nranks, left, right, i, k, count, position, index
  type(MPI_Datatype) :: vec, dup
  type(MPI_Request) :: reqs(4)
  type(MPI_Status) :: status, statuses(4)
  double precision :: sbuf(2 * n), rbuf(2 * n), rbuf2(2 * n), contig(n), packed(n), sums(1000)
  logical :: done

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  right = mod(rank + 1, nranks)
  left = mod(rank - 1 + nranks, nranks)
  call MPI_Type_vector(n, 1, 2, MPI_DOUBLE_PRECISION, vec)
  call MPI_Type_commit(vec)
  call MPI_Type_dup(vec, dup)
  do i = 1, 2 * n
    sbuf(i) = value(rank, i)
  end do

  ! Isend / Irecv, Waitall with statuses.
  rbuf = -1d0
  rbuf2 = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 1, MPI_COMM_WORLD, reqs(1))
  call MPI_Irecv(rbuf2, 1, dup, right, 2, MPI_COMM_WORLD, reqs(2))
  call MPI_Isend(sbuf, 1, vec, right, 1, MPI_COMM_WORLD, reqs(3))
  call MPI_Isend(sbuf, 1, dup, left, 2, MPI_COMM_WORLD, reqs(4))
  call MPI_Waitall(4, reqs, statuses)
  call check(all(reqs == MPI_REQUEST_NULL), 'waitall requests freed')
  call check(statuses(1)%MPI_SOURCE == left .and. statuses(1)%MPI_TAG == 1, 'waitall status 1')
  call check(statuses(2)%MPI_SOURCE == right .and. statuses(2)%MPI_TAG == 2, 'waitall status 2')
  call MPI_Get_count(statuses(2), MPI_DOUBLE_PRECISION, count)
  call check(count == n, 'waitall count')
  call check_vector(rbuf, left, 'waitall vector')
  call check_vector(rbuf2, right, 'waitall dup of vector')

  ! Wait with a status, Waitany, a Test loop, statuses ignored.
  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 3, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(sbuf, 1, vec, right, 3, MPI_COMM_WORLD, reqs(2))
  call MPI_Wait(reqs(1), status)
  call check(status%MPI_SOURCE == left .and. status%MPI_TAG == 3, 'wait status')
  call check_vector(rbuf, left, 'wait vector')
  call MPI_Waitall(1, reqs(2:2), MPI_STATUSES_IGNORE)

  rbuf = -1d0
  reqs(1) = MPI_REQUEST_NULL
  call MPI_Irecv(rbuf, 1, vec, right, 4, MPI_COMM_WORLD, reqs(2))
  call MPI_Isend(sbuf, 1, vec, left, 4, MPI_COMM_WORLD, reqs(3))
  call MPI_Waitany(2, reqs(1:2), index, status)
  ! Not the index: MPICH 4.0's own mpi_f08 Waitany returns it 0-based (Veneer's: 1-based).
  call check(reqs(2) == MPI_REQUEST_NULL .and. status%MPI_SOURCE == right, 'waitany request/status')
  call check(index == 1 .or. index == 2, 'waitany index')
  call check_vector(rbuf, right, 'waitany vector')
  call MPI_Wait(reqs(3), MPI_STATUS_IGNORE)

  rbuf = -1d0
  call MPI_Irecv(rbuf, 1, vec, left, 5, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(sbuf, 1, vec, right, 5, MPI_COMM_WORLD, reqs(2))
  done = .false.
  do while (.not. done)
    call MPI_Test(reqs(1), done, MPI_STATUS_IGNORE)
  end do
  call check_vector(rbuf, left, 'test vector')
  call MPI_Wait(reqs(2), MPI_STATUS_IGNORE)

  ! Recv (even ranks send first).
  rbuf = -1d0
  if (mod(rank, 2) == 0) then
    call MPI_Send(sbuf, 1, vec, right, 6, MPI_COMM_WORLD)
    call MPI_Recv(rbuf, 1, vec, left, 6, MPI_COMM_WORLD, status)
  else
    call MPI_Recv(rbuf, 1, vec, left, 6, MPI_COMM_WORLD, status)
    call MPI_Send(sbuf, 1, vec, right, 6, MPI_COMM_WORLD)
  end if
  call check(status%MPI_SOURCE == left .and. status%MPI_TAG == 6, 'recv status')
  call check_vector(rbuf, left, 'recv vector')

  ! Pack / Unpack.
  position = 0
  call MPI_Pack(sbuf, 1, vec, packed, 8 * n, position, MPI_COMM_WORLD)
  call check(position == 8 * n, 'pack position')
  position = 0
  call MPI_Unpack(packed, 8 * n, position, contig, n, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD)
  do i = 1, n
    call check(contig(i) == value(rank, 2 * i - 1), 'packed bytes')
  end do
  rbuf2 = -1d0
  position = 0
  call MPI_Unpack(packed, 8 * n, position, rbuf2, 1, vec, MPI_COMM_WORLD)
  call check_vector(rbuf2, rank, 'unpack into vector')

  ! Allreduce.
  do k = 1, size(sums)
    sums(k) = dble(rank + k)
  end do
  call MPI_Allreduce(MPI_IN_PLACE, sums, size(sums), MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  do k = 1, size(sums)
    call check(sums(k) == dble(nranks * k + nranks * (nranks - 1) / 2), 'allreduce sum')
  end do

  call MPI_Type_free(vec)
  call MPI_Type_free(dup)
  if (rank == 0) print '(a,i0)', 'fortran f08_test: ok, ranks ', nranks
  call MPI_Finalize()

contains

  double precision function value(r, i)
    integer, intent(in) :: r, i
    value = dble(r) * 1d6 + dble(i)
  end function

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      print '(a,i0,2a)', 'fortran f08_test: rank ', rank, ' FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine

  subroutine check_vector(buf, from, what)
    double precision, intent(in) :: buf(2 * n)
    integer, intent(in) :: from
    character(*), intent(in) :: what
    integer :: j
    do j = 1, n
      call check(buf(2 * j - 1) == value(from, 2 * j - 1) .and. buf(2 * j) == -1d0, what)
    end do
  end subroutine

end program
